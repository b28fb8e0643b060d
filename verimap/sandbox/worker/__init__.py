"""The sandbox worker: runs untrusted jobs, a fresh process per job (stdlib only).

It runs inside the sandbox container (or as a host subprocess for the process
backend) and talks to the host with length-prefixed JSON frames. Every job gets
a fresh process with rlimits and an empty scratch directory, forked by a
spawner that never sees a job; the supervisor enforces the wall timeout, caps
output, and before the next job kills every process the job left behind and
wipes scratch, so nothing of one job reaches the next.

Verdicts are never taken from the job's own process when the job could forge
them: code under test runs in a separate exec'd interpreter behind a proxy and
only plain data crosses (a tagged JSON codec), so the trusted test process alone
decides whether the tests passed.

The package is found by its `__file__`: the host imports its pure modules
(`constants`, `wire`, `examples`) as `verimap.sandbox.worker`, the image build
copies the directory, and a worker process loads it as the top-level package
`verimap_worker` (see `verimap.sandbox.launch`), without verimap itself. So
this file imports nothing: the host must be able to read the constants without
starting anything of the worker.

Modules, in the order a job meets them: `serve` (the host protocol),
`supervisor` (one job at a time, cleanup), `spawner` (forks job processes),
`jobs` (inside a job process), `restricted` (the VF runtime guards), `helpers`,
`examples` and `snippets` (what a VF may call), `candidate` (code under test in
its own interpreter), `wire` (framing and codec), `unix` and `constants`.
"""
