"""Exits 0 when stock.json is consistent: no negative quantities."""

import json
import sys

stock = json.load(open("stock.json"))
bad = [sku for sku, item in stock.items() if item["available"] < 0 or item["reserved"] < 0]
print("negative quantities:", bad) if bad else print(f"{len(stock)} SKUs consistent")
sys.exit(1 if bad else 0)
