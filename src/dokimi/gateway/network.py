"""The batch network: a docker ``--internal`` network with no route out, and the host firewall that keeps
it away from every host service but dokimi's two.

An ``--internal`` network has no route to other networks, but the host itself still answers on the
network's bridge address, and through it every host address (the docker0 bridge, the machine's own
addresses): a service listening on ``0.0.0.0`` on the host is reachable from the container. So
:func:`open_batch_network` also puts a chain in the host's INPUT table for packets arriving from the bridge:
TCP to the bridge address on the model gateway's and the egress proxy's ports is accepted, any other TCP
connection is reset, everything else is dropped (and for IPv6 everything is dropped). Inter-container
traffic on the bridge is off (``enable_icc=false``), so one cell's agent cannot reach another's container.

The chain needs ``iptables`` and root. Without them a sealed run is refused with the choice that is left:
``--agent-network`` (the agent then reaches any host). :func:`close_batch_network` removes the rules and the
network; a crashed run leaves them named after the network (``DOKIMI-<id>``), and the next run of the
same batch replaces them.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass

from dokimi import process
from dokimi.constants import LABEL_BATCH, LABEL_MANAGED
from dokimi.errors import ContainerError, PrerequisiteError
from dokimi.sandbox.container import container_name
from dokimi.sandbox.docker import docker

__all__ = [
    "BatchNetwork",
    "close_batch_network",
    "remove_batch_networks",
    "firewall_rules",
    "network_name",
    "open_batch_network",
]

IPTABLES_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class BatchNetwork:
    name: str
    id: str
    bridge: str
    """The bridge interface on the host (``br-<id[:12]>``)."""
    address: str
    """The host's address on the bridge: where the gateway and the egress proxy listen."""
    subnet: str
    chain: str
    """The host firewall chain of this network."""


def network_name(batch: str, where: str | None = None) -> str:
    """``dokimi-<batch>-net-internal``; on a node of a cluster ``dokimi-<batch>-net-node-<node>``, since
    two nodes may share a docker daemon."""
    return container_name(batch, "net", "internal" if where is None else f"node-{where}")


def _docker(args: Sequence[str], *, check: bool = True) -> process.Completed:
    return docker(args, check=check)


def _inspect(name: str) -> dict[str, object] | None:
    result = _docker(["network", "inspect", name], check=False)
    if not result.ok:
        return None
    data = json.loads(result.stdout)
    return data[0] if data else None


def firewall_rules(net: BatchNetwork, ports: Sequence[int]) -> list[list[str]]:
    """The chain's rules (iptables arguments after ``-A CHAIN``): the ports on the bridge address, then
    drop. Established replies to connections the host opened are not affected: the host opens none."""
    rules = [["-p", "tcp", "-d", net.address, "--dport", str(port), "-j", "ACCEPT"] for port in ports]
    rules.append(["-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset"])  # refused at once, not a hang
    rules.append(["-j", "DROP"])
    return rules


def firewall_problem() -> str | None:
    """Why the batch network's firewall chain cannot be set here, or None."""
    if shutil.which("iptables") is None:
        return "iptables is not installed"
    if os.geteuid() != 0:
        return "dokimi is not running as root"
    return None


def _require_firewall() -> None:
    problem = firewall_problem()
    if problem is not None:
        raise PrerequisiteError(
            "a sealed run keeps the agent's container away from the host's own services with a host "
            f"firewall rule, which needs iptables and root ({problem})",
            hint="run as root with iptables installed (apt-get install iptables), or pass --agent-network "
            "NET to give the agent a docker network of your choice (it then reaches any host)",
        )


def _iptables(tool: str, args: Sequence[str], *, check: bool = True) -> process.Completed:
    result = process.run([tool, "-w", "10", *args], timeout=IPTABLES_TIMEOUT_S)
    if check and not result.ok:
        raise ContainerError(
            f"`{tool} {' '.join(args)}` exited {result.returncode}: {result.stderr.strip()[-300:]}",
            hint="dokimi needs to add a chain to the host's INPUT table for the batch network",
        )
    return result


def _remove_chain(tool: str, chain: str, bridge: str) -> None:
    while _iptables(tool, ["-D", "INPUT", "-i", bridge, "-j", chain], check=False).ok:
        pass
    _iptables(tool, ["-F", chain], check=False)
    _iptables(tool, ["-X", chain], check=False)


def open_batch_network(batch: str, ports: Sequence[int] = (), *, where: str | None = None) -> BatchNetwork:
    """The batch's internal network (made, or reused from an earlier run of the batch) with its firewall
    chain; ``ports`` are opened now or later with :func:`allow_ports`. ``where``: the cluster node it is for
    (:func:`network_name`)."""
    _require_firewall()
    name = network_name(batch, where)
    info = _inspect(name)
    if info is None:
        _docker(
            [
                "network",
                "create",
                "--internal",
                "--driver",
                "bridge",
                "-o",
                "com.docker.network.bridge.enable_icc=false",
                "--label",
                f"{LABEL_MANAGED}=1",
                "--label",
                f"{LABEL_BATCH}={batch}",
                name,
            ]
        )
        info = _inspect(name)
    if info is None:
        raise ContainerError(f"docker network {name} was created but cannot be inspected")
    net = _describe(name, info)
    allow_ports(net, ports)
    return net


def _describe(name: str, info: dict[str, object]) -> BatchNetwork:
    ipam = info.get("IPAM")
    configs = ipam.get("Config") if isinstance(ipam, dict) else None
    config = configs[0] if isinstance(configs, list) and configs else {}
    address, subnet = str(config.get("Gateway") or ""), str(config.get("Subnet") or "")
    if not address or not info.get("Internal"):
        raise ContainerError(
            f"docker network {name} is not an internal network with a gateway address",
            hint=f"remove it (docker network rm {name}) and run again",
        )
    net_id = str(info.get("Id") or "")
    options = info.get("Options")
    bridge = ""
    if isinstance(options, dict):
        bridge = str(options.get("com.docker.network.bridge.name") or "")
    return BatchNetwork(
        name=name,
        id=net_id,
        bridge=bridge or f"br-{net_id[:12]}",
        address=address,
        subnet=subnet,
        chain=f"DOKIMI-{net_id[:12]}",
    )


def allow_ports(net: BatchNetwork, ports: Sequence[int]) -> None:
    """(Re)write the network's chain: the given ports on the bridge address, everything else dropped."""
    for tool in ("iptables", "ip6tables"):
        if shutil.which(tool) is None:
            continue
        _remove_chain(tool, net.chain, net.bridge)
        _iptables(tool, ["-N", net.chain])
        rules = firewall_rules(net, ports) if tool == "iptables" else [["-j", "DROP"]]
        for rule in rules:
            _iptables(tool, ["-A", net.chain, *rule])
        _iptables(tool, ["-I", "INPUT", "1", "-i", net.bridge, "-j", net.chain])


def close_batch_network(net: BatchNetwork) -> None:
    """Remove the firewall chain and the network (containers still on it are the caller's to stop first).
    Never raises: what cannot be removed is left, and the next run of the batch reuses or replaces it."""
    for tool in ("iptables", "ip6tables"):
        if shutil.which(tool) is not None:
            try:
                _remove_chain(tool, net.chain, net.bridge)
            except Exception:
                pass
    try:
        _docker(["network", "rm", net.name], check=False)
    except Exception:
        pass


def remove_batch_networks(batch: str) -> list[str]:
    """Every network of ``batch`` on this docker daemon (the batch's, and those its cluster nodes made) with
    its firewall chain: what a run killed with SIGKILL, or a cluster node that died, left behind. Networks a
    container still uses are left (docker refuses); returns the names removed."""
    listed = _docker(["network", "ls", "-q", "--filter", f"label={LABEL_BATCH}={batch}"], check=False)
    removed = []
    for net_id in listed.stdout.split():
        info = _inspect(net_id)
        if info is None or not info.get("Internal"):
            continue
        net = _describe(str(info.get("Name") or net_id), info)
        close_batch_network(net)
        if _inspect(net.id) is None:
            removed.append(net.name)
    return removed
