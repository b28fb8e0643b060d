"""Methods other than the coordinator's plan-execute-verify loop: the baselines that spend the
same compute without verifying (`baselines`), so that what verimap's checks add can be measured.
"""
