import pytest

from nccl_bench.errors import UserInputError
from nccl_bench.units.hostlist import compress, expand


@pytest.mark.parametrize(("text", "hosts"), [
    ("node[01-03]", ["node01", "node02", "node03"]),
    ("node[03,07-08]", ["node03", "node07", "node08"]),
    ("nodea,nodeb,nodec", ["nodea", "nodeb", "nodec"]),
    ("gpu[8-10],login", ["gpu8", "gpu9", "gpu10", "login"]),
    ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
    ("a[1-2]-ib", ["a1-ib", "a2-ib"]),
    ("node[098-101]", ["node098", "node099", "node100", "node101"]),
    (" node1 , node1,node2", ["node1", "node2"]),
])
def test_expand(text, hosts):
    assert expand(text) == hosts


@pytest.mark.parametrize(("text", "message"), [
    ("node[01-03", "'[' without ']' in hostlist 'node[01-03'"),
    ("node01]", "']' without '[' in hostlist 'node01]'"),
    ("node[[1]]", "nested '[' in hostlist 'node[[1]]'"),
    ("node[3-1]", "range 3-1 runs backwards in hostlist 'node[3-1]'"),
    ("node[a-b]", "expected numbers or ranges like 01-04 inside [...], got [a-b] in hostlist 'node[a-b]'"),
    ("node1,,node2", "empty name in hostlist 'node1,,node2'"),
    ("n[0-999999]", "range 0-999999 names more than 100,000 hosts"),
])
def test_expand_refuses_with_the_option_named(text, message):
    with pytest.raises(UserInputError) as info:
        expand(text, "--expect-hosts")
    assert (info.value.option, info.value.problem) == ("--expect-hosts", message)


@pytest.mark.parametrize(("hosts", "text"), [
    ([], ""),
    (["node03"], "node03"),
    (["node08", "node03", "node07"], "node[03,07-08]"),
    (["node01", "node02", "node03", "node05"], "node[01-03,05]"),
    (["nodea", "nodeb"], "nodea,nodeb"),
    (["gpu1", "login", "gpu2", "gpu2"], "gpu[1-2],login"),
    (["node01", "node100"], "node01,node100"),  # different widths stay apart, as Slurm keeps them
])
def test_compress(hosts, text):
    assert compress(hosts) == text


def test_round_trip():
    hosts = [f"dgx{n:03d}" for n in (1, 2, 3, 10, 11, 40)]
    assert compress(hosts) == "dgx[001-003,010-011,040]"
    assert expand(compress(hosts)) == hosts
