"""Sealed real runs (contract, network section): the model gateway, the egress allow-list proxy, the batch
network, and the one price table.

- :mod:`dokimi.gateway.model`: the host-side gateway the agent's harness reaches its model through (dummy
  key swapped for the real one, every request and response recorded, the authoritative tokens, cost, turns);
- :mod:`dokimi.gateway.apis`: per model API, the paths forwarded and the headers that carry the key;
- :mod:`dokimi.gateway.budget`: the cell's and the batch's budget, held request by request;
- :mod:`dokimi.gateway.relay`: an answer decoded and scrubbed of the real key on its way back;
- :mod:`dokimi.gateway.boundary`: the one rule between an infrastructure error and a cell's failure, read from
  a cell's gateway.jsonl;
- :mod:`dokimi.gateway.egress`: the allow-list proxy a task's ``egress`` hosts are reached through;
- :mod:`dokimi.gateway.network`: the per-batch ``--internal`` docker network and its host firewall chain;
- :mod:`dokimi.gateway.prices`: USD per million tokens per model, with the date checked;
- :mod:`dokimi.gateway.usage`: tokens read from any supported wire format.
"""

from __future__ import annotations

from dokimi.gateway.boundary import ModelReach, infra_only_when_upstream_failed
from dokimi.gateway.egress import EgressCell, EgressProxy
from dokimi.gateway.model import CellUsage, GatewayCell, ModelGateway
from dokimi.gateway.prices import CHECKED, PRICES, Usage, cost_of

__all__ = [
    "CHECKED",
    "PRICES",
    "CellUsage",
    "EgressCell",
    "EgressProxy",
    "GatewayCell",
    "ModelGateway",
    "ModelReach",
    "Usage",
    "cost_of",
    "infra_only_when_upstream_failed",
]
