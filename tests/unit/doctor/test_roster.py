"""Expected hosts, missing suspects and the exclude list (doctor/roster.py), and doctor.json's keys for them."""

from __future__ import annotations

import dataclasses
import json

import pytest

from nccl_bench.doctor.doctor_report import DoctorReport, report_json
from nccl_bench.doctor.roster import exclude_file_text, excluded_hosts, expected_hosts, missing_hosts, missing_suspects
from nccl_bench.doctor.verdicts import Suspect
from nccl_bench.errors import UserInputError
from tests.helpers.doctor_reports import three_node_header, three_node_judgement

SLURM_ENV = {"SLURM_JOB_NODELIST": "node[01-04]", "SLURM_STEP_NODELIST": "node[01-03]"}


def test_expected_hosts_given_win_then_slurms_job_nodelist():
    assert expected_hosts(("x1", "x2"), "slurm", SLURM_ENV) == (("x1", "x2"), "--expect-hosts")
    assert expected_hosts(None, "slurm", SLURM_ENV) == (("node01", "node02", "node03", "node04"),
                                                        "SLURM_JOB_NODELIST")
    assert expected_hosts(None, "torchrun", SLURM_ENV) == ((), "")  # torchrun inside an allocation: no claim
    assert expected_hosts(None, "slurm", {}) == ((), "")


def test_a_bad_slurm_nodelist_is_named():
    with pytest.raises(UserInputError) as info:
        expected_hosts(None, "slurm", {"SLURM_JOB_NODELIST": "node[01-"})
    assert info.value.option == "SLURM_JOB_NODELIST"


def test_missing_hosts_in_expected_order_short_names_match():
    assert missing_hosts(["node01", "node02", "node03", "node04"], ["node03.cl", "node01"]) == ["node02", "node04"]
    assert missing_hosts(["node01.cl"], ["node01"]) == []
    assert missing_hosts([], ["node01"]) == []


def test_missing_suspects_say_where_the_list_came_from():
    [suspect] = missing_suspects(["node01", "node02", "node04"], ["node01", "node02"], "--expect-hosts")
    assert (suspect.kind, suspect.hosts, suspect.rail, suspect.measured_gbps) == ("missing", ("node04",), None, None)
    assert suspect.line() == "missing node04: expected (--expect-hosts node[01-02,04]) but never joined the run"


def test_exclude_names_node_rail_and_missing_hosts_not_links():
    suspects = [
        Suspect("node", ("node07",), None, 0.1, 1.0, "slow"),
        Suspect("rail", ("node03",), 1, 0.1, 1.0, "slow rail"),
        Suspect("link", ("node01", "node02"), None, 0.1, 1.0, "slow pair"),
        Suspect("rail", ("node03",), 2, 0.1, 1.0, "another slow rail"),
        *missing_suspects(["node07", "node08"], ["node07"], "SLURM_JOB_NODELIST"),
    ]
    assert excluded_hosts(suspects) == ["node07", "node03", "node08"]
    assert exclude_file_text(suspects) == "node07\nnode03\nnode08\n"
    assert exclude_file_text(suspects[2:3]) == ""  # written even so: an empty file says "keep nobody out"


def test_doctor_json_has_missing_expected_and_exclude():
    judgement = three_node_judgement()
    judgement.suspects.extend(missing_suspects(["a", "b", "c", "d"], ["a", "b", "c"], "--expect-hosts"))
    header = dataclasses.replace(three_node_header(), expected_hosts=("a", "b", "c", "d"),
                                 expected_from="--expect-hosts")
    data = json.loads(json.dumps(report_json(DoctorReport(None, header, judgement, wall_s=1.0))))
    assert data["schema_version"] == 3 and data["verdict"] == "suspects"
    assert data["suspects"][-1] == {"kind": "missing", "hosts": ["d"], "rail": None, "measured_gbps": None,
                                    "fleet_median_gbps": None, "degraded": False,
                                    "reason": "expected (--expect-hosts a,b,c,d) but never joined the run"}
    assert data["expected_hosts"] == {"hosts": ["a", "b", "c", "d"], "source": "--expect-hosts"}
    assert data["exclude"] == ["c", "d"]
    assert report_json(DoctorReport(None, three_node_header(), three_node_judgement()))["expected_hosts"] is None
