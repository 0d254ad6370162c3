"""Two machines that share a hostname (cloned images, containers given one --hostname) are named before
anything is measured: ranks are grouped into nodes by hostname."""

from __future__ import annotations

import os

from nccl_bench.ranks.dist import Machine, shared_hostname, this_machine

A, B = Machine("boot-a/1", "10.0.0.1"), Machine("boot-b/1", "10.0.0.3")


def test_one_name_on_two_machines_is_said_with_ranks_and_addresses():
    assert shared_hostname(["nodea", "nodea", "nodeb", "nodea"], [A, A, Machine("boot-c/1", "10.0.0.2"), B]) == (
        "nodea names 2 different machines (rank(s) 0,1 at 10.0.0.1; rank(s) 3 at 10.0.0.3): cloned images or "
        "containers given one hostname? Ranks are told apart by hostname; give each machine its own")


def test_a_network_namespace_of_its_own_is_another_machine():
    """Containers on one host (one boot id) with their own network stacks talk over the network."""
    assert shared_hostname(["n", "n"], [Machine("boot/1", "10.0.0.1"), Machine("boot/2", "10.0.0.2")]) is not None


def test_names_that_are_one_machine_each_pass():
    assert shared_hostname(["nodea", "nodea", "nodeb"], [A, A, B]) is None
    assert shared_hostname(["nodea", "nodea"], [A, Machine("", "?")]) is None  # nothing known: the name decides


def test_this_process_knows_its_machine():
    here = this_machine({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"})
    assert here.identity.endswith(f"/{os.stat('/proc/self/ns/net').st_ino}") and here.address == "127.0.0.1"
    assert this_machine({"MASTER_ADDR": "no such host.invalid"}).address == "?"
