"""--nccl-env's grammar: every value NCCL accepts is one variant, taken whole; a repeated name gives
several variants; the product over names, labels and the shell loop."""

from __future__ import annotations

import shlex

import pytest

from nccl_bench.units.nccl_env import (
    NCCL_PROTOCOLS,
    as_texts,
    choice_problem,
    enabled_for,
    label,
    parse_assignments,
    parse_setting,
    read_choice,
    shell_loop,
    variants,
)

# Values of NCCL's own grammar: a list, an exclusion, per-collective settings, an exact name, paths.
NCCL_VALUES = [
    "NCCL_ALGO=allreduce:ring;allgather:^tree",
    "NCCL_SOCKET_IFNAME==eth0",
    "NCCL_IB_HCA==mlx5_0:1",
    "NCCL_TOPO_FILE=/etc/nccl/topo.xml",
    "NCCL_TUNER_PLUGIN=/opt/nccl/libnccl-tuner-example.so",
    "NCCL_SOCKET_IFNAME=^docker0,lo",
    "NCCL_ALGO=^NVLS,NVLSTree",
    "NCCL_ALGO=Ring,Tree",
]


@pytest.mark.parametrize("text", NCCL_VALUES)
def test_nccl_env_takes_every_value_nccl_accepts_as_one_variant(text):
    name, value = text.split("=", 1)
    parsed = parse_assignments([text])
    assert parsed == ((name, (value,)),)
    [variant] = variants(parsed)
    assert variant == ((name, value),) and label(variant) == text
    assert as_texts(parsed[0]) == (text,)


def test_nccl_env_repeated_name_gives_one_variant_per_value_and_never_splits_a_list():
    parsed = parse_assignments(["NCCL_SOCKET_IFNAME=^docker0,lo", "NCCL_SOCKET_IFNAME==eth0"])
    assert [label(v) for v in variants(parsed)] == ["NCCL_SOCKET_IFNAME=^docker0,lo", "NCCL_SOCKET_IFNAME==eth0"]


@pytest.mark.parametrize("text, problem", [
    ("NCCL_ALGO", "is not NAME=VALUE"),
    ("LD_PRELOAD=x.so", "'LD_PRELOAD' is not an NCCL variable"),
    ("nccl_algo=Ring", "is not an NCCL variable"),
    ("NCCL_ALGO=", "no value given"),
    ("NCCL_ALGO=Ring Tree", "'Ring Tree' is not a value NCCL reads"),
    ("NCCL_ALGO=Ring\x1b[2J", "is not a value NCCL reads"),
    ("NCCL_ALGO=$(id)", "is not a value NCCL reads"),
    ("NCCL_ALGO=<b>", "is not a value NCCL reads"),
])
def test_what_is_not_a_name_or_a_value_is_refused(text, problem):
    with pytest.raises(ValueError, match=problem):
        parse_setting(text)


def test_a_value_given_twice_and_too_many_variants_are_refused():
    with pytest.raises(ValueError, match="NCCL_ALGO=Ring is given twice"):
        parse_assignments(["NCCL_ALGO=Ring", "NCCL_ALGO=Ring"])
    many = [f"NCCL_X{i}={v}" for i in range(7) for v in "ab"]  # 2**7 = 128 variants
    with pytest.raises(ValueError, match="128 variants; a run takes at most 64"):
        parse_assignments(many)


def test_variants_are_the_product_the_first_name_slowest():
    found = variants(parse_assignments(["NCCL_ALGO=Ring", "NCCL_PROTO=LL", "NCCL_ALGO=Tree", "NCCL_PROTO=Simple"]))
    assert [label(v) for v in found] == [
        "NCCL_ALGO=Ring NCCL_PROTO=LL", "NCCL_ALGO=Ring NCCL_PROTO=Simple",
        "NCCL_ALGO=Tree NCCL_PROTO=LL", "NCCL_ALGO=Tree NCCL_PROTO=Simple"]
    assert variants(()) == [()] and label(()) == ""


def test_the_shell_loop_nests_one_loop_per_name_with_every_value_quoted():
    loop = shell_loop(parse_assignments(["NCCL_ALGO=allreduce:ring;allgather:^tree", "NCCL_ALGO=Tree",
                                         "NCCL_PROTO=LL"]), "torchrun ... nccl-bench sweep")
    assert loop == ("for v0 in 'allreduce:ring;allgather:^tree' Tree; do for v1 in LL; do "
                    'NCCL_ALGO="$v0" NCCL_PROTO="$v1" torchrun ... nccl-bench sweep; done; done;')
    assert shlex.split(loop)[3] == "allreduce:ring;allgather:^tree"  # the shell reads the value whole


@pytest.mark.parametrize("value, function, enabled", [
    ("^NVLS", "AllReduce", {"Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLSTree", "PAT"}),
    ("ring,TREE", "AllReduce", {"Ring", "Tree"}),
    ("allreduce:ring;allgather:^tree", "AllReduce", {"Ring"}),
    ("allreduce:ring;allgather:^tree", "AllGather", {"Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree",
                                                     "PAT"}),
    ("allreduce:ring;allgather:^tree", "Broadcast", None),  # not named: NCCL's own choice
    ("ring,collnetdirect;allreduce:tree", "AllReduce", {"Tree"}),
    ("ring,collnetdirect;allreduce:tree", "Broadcast", {"Ring", "CollNetDirect"}),
    ("", "AllReduce", None),
    ("Ring;Tree", "AllReduce", None),  # NCCL: all entries except the first must have a prefix
    ("allreduce:Rign", "AllReduce", None),
    ("alltoall:ring", "AllReduce", None),
])
def test_nccl_algo_parsed_as_nccl_does(value, function, enabled):
    found = enabled_for(value, function)
    assert (None if found is None else set(found)) == enabled


def test_nccl_proto_uses_the_same_grammar():
    assert enabled_for("^LL128;allreduce:LL128", "AllReduce", NCCL_PROTOCOLS) == {"LL128"}
    assert enabled_for("^LL128;allreduce:LL128", "AllGather", NCCL_PROTOCOLS) == {"LL", "Simple"}


# NCCL's grammar (src/graph/tuning.cc, parseList and its callers): `;`-separated settings, each
# `[function:]list`, only the first without a function; a list of names matched with strcasecmp, `^`
# for all but them. Names: src/init.cc's ncclFuncStr, ncclAlgoStr, ncclProtoStr.
@pytest.mark.parametrize("name,value", [
    ("NCCL_ALGO", "Ring"), ("NCCL_ALGO", "ring,TREE"), ("NCCL_ALGO", "^nvls,nvlstree"),
    ("NCCL_ALGO", "allreduce:tree;allgather:^ring"), ("NCCL_ALGO", "Ring;AllReduce:CollNetDirect,collnetchain"),
    ("NCCL_ALGO", "pat"), ("NCCL_PROTO", "LL,ll128"), ("NCCL_PROTO", "^LL128"), ("NCCL_PROTO", "allreduce:Simple"),
    ("NCCL_PROTO", ""), ("NCCL_SOCKET_IFNAME", "^docker0,lo"),
])
def test_values_nccl_reads_pass(name, value):
    assert choice_problem(name, value) is None


@pytest.mark.parametrize("name,value,problem", [
    ("NCCL_ALGO", "bogus", "'bogus' is not a name NCCL knows (Tree, Ring, CollNetDirect, CollNetChain, NVLS, "
                           "NVLSTree, PAT, in any case)"),
    ("NCCL_ALGO", "^ring,tre", "'tre' is not a name NCCL knows (Tree, Ring, CollNetDirect, CollNetChain, NVLS, "
                               "NVLSTree, PAT, in any case)"),
    ("NCCL_PROTO", "LL64", "'LL64' is not a name NCCL knows (LL, LL128, Simple, in any case)"),
    ("NCCL_PROTO", "allreduce:Simple;allgater:LL", "'allgater' is not a collective NCCL knows (Broadcast, Reduce, "
                                                   "AllGather, ReduceScatter, AllReduce)"),
    ("NCCL_ALGO", "allreduce:ring;tree", "'tree' names no collective; only the first setting may apply to every one "
                                         "(write FUNCTION:tree, FUNCTION one of Broadcast, Reduce, AllGather, "
                                         "ReduceScatter, AllReduce)"),
    ("NCCL_ALGO", "Simple", "'Simple' is not a name NCCL knows (Tree, Ring, CollNetDirect, CollNetChain, NVLS, "
                            "NVLSTree, PAT, in any case)"),  # a protocol where an algorithm goes
])
def test_a_name_nccl_does_not_know_is_one_line_naming_it(name, value, problem):
    assert choice_problem(name, value) == problem


def test_read_choice_gives_each_function_what_nccl_enables():
    chosen = read_choice("^LL128;allreduce:LL128", NCCL_PROTOCOLS)
    assert chosen["allreduce"] == {"LL128"} and chosen["allgather"] == chosen[""] == {"LL", "Simple"}


def test_a_misspelt_choice_in_nccl_env_is_refused_with_the_setting():
    with pytest.raises(ValueError, match=r"^NCCL_PROTO=bogus: 'bogus' is not a name NCCL knows"):
        parse_assignments(["NCCL_ALGO=Ring", "NCCL_PROTO=bogus"])
