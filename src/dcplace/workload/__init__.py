"""Workloads: the request table, trace readers and generators."""

from dcplace.workload.azure import read_azure
from dcplace.workload.huawei import read_huawei_events, read_huawei_lifetime, write_huawei_events
from dcplace.workload.synthetic import synthetic_trace
from dcplace.workload.table import RequestTable
from dcplace.workload.traces import load_trace, shared_data_dir, trace_available

__all__ = [
    "RequestTable",
    "load_trace",
    "read_azure",
    "read_huawei_events",
    "read_huawei_lifetime",
    "shared_data_dir",
    "synthetic_trace",
    "trace_available",
    "write_huawei_events",
]
