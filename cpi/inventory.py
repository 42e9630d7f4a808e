"""Moved to cpi.clouds.inventory (the shapes of the clouds' operator interface live beside
it). This name stays only because cpi/clouds/local/inventory.py still imports it from here;
delete it once that import says cpi.clouds.inventory."""

from cpi.clouds.inventory import Offer, Resource

__all__ = ["Offer", "Resource"]
