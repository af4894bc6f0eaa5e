import pytest

from flharness.units import Duration, Rate, format_seconds, human_duration


@pytest.mark.parametrize("text,bps,canon", [
    ("10mbit", 10e6, "10mbit"), ("1Gbit", 1e9, "1gbit"), ("500kbit", 5e5, "500kbit"),
    ("1.5mbit", 1.5e6, "1.5mbit"), ("2mbps", 16e6, "2mbps"),
])
def test_rate_parse(text, bps, canon):
    r = Rate.parse(text)
    assert r.bps == bps and r.text == canon


@pytest.mark.parametrize("bad", ["50mbits", "10", "mbit", "-5mbit", "10 mbit", "0mbit", "1e6bit", ""])
def test_rate_rejects(bad):
    with pytest.raises(ValueError):
        Rate.parse(bad)


@pytest.mark.parametrize("text,seconds", [("20ms", 0.02), ("500us", 0.0005), ("2s", 2.0), ("0ms", 0.0)])
def test_duration_parse(text, seconds):
    assert Duration.parse(text).seconds == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["-20ms", "20", "20 ms", "ms", "20min", "1e3ms"])
def test_duration_rejects(bad):
    with pytest.raises(ValueError):
        Duration.parse(bad)


def test_format_seconds_round_trips():
    for s in (0.0, 0.005, 0.01, 0.04, 0.08, 1.0, 0.0005, 0.0125):
        assert Duration.parse(format_seconds(s)).seconds == pytest.approx(s)
    assert format_seconds(0.04) == "40ms" and format_seconds(0) == "0ms"


def test_human_duration():
    assert human_duration(42) == "42s" and human_duration(185) == "3m05s" and human_duration(7620) == "2h07m"


def test_significant_digits_without_an_exponent():
    from flharness.units import significant
    assert [significant(v) for v in (1.5495, 230.59, 999.6, 1307.56, 4327.34, 0.0, -12345.6)] == \
        ["1.55", "231", "1000", "1308", "4327", "0", "-12346"]
    assert significant(0.00123) == "0.00123" and significant(1234.5, 4) == "1234" and significant(12345.6, 4) == "12346"
