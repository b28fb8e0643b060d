from hypothesis import given
from hypothesis import strategies as st

from verimap.base.numbers import final_number, normalize_number
from verimap.checks.programs import number_in


def test_spellings_of_one_number_normalise_alike():
    assert normalize_number("$1,234.50") == "1234.5"
    assert normalize_number("18.0") == "18"
    assert normalize_number("2.50") == "2.5"
    assert normalize_number("1e5") == "100000"
    assert normalize_number("12%") == "12"
    assert normalize_number("seven") is None
    assert normalize_number("inf") is None
    assert normalize_number("1e999999999") is None  # not written out as a billion digits
    assert normalize_number("1e-999999999") is None
    assert normalize_number("1e308") == "1" + "0" * 308


@given(st.integers(min_value=-(10**60), max_value=10**60))
def test_a_whole_number_of_any_length_is_kept_exactly(n):
    assert normalize_number(str(n)) == str(n)
    assert normalize_number(f"{n}.0") == str(n)


def test_a_reply_ending_on_a_huge_number_is_read_not_raised():
    """A sampled reply once ended on a 30-digit product; reading it raised and ended the run."""
    huge = "1" + "0" * 40
    assert final_number(f"So the total is {huge}. The answer is {huge}.") == huge
    assert number_in(f"The answer is {huge}.") == float(huge)
