"""Java's HashMap iteration order as our mqadmin reproduces it (tools/mqadmin/java.py), against
orders java.util.HashMap printed (JDK 17)."""

from __future__ import annotations

from sidewinder.protocol.message import java_string_hash
from sidewinder.tools.mqadmin.java import java_hash_order, java_hashmap_order

# new HashMap<>(n, 1) filled from a default HashMap of "k0x".."k{n-1}x": its keySet().
SIZED_ORDERS = {
    3: ["k2x", "k0x", "k1x"],
    7: ["k2x", "k3x", "k0x", "k1x", "k6x", "k4x", "k5x"],
    11: ["k2x", "k3x", "k0x", "k1x", "k8x", "k9x", "k6x", "k7x", "k4x", "k5x", "k10x"],
}


def test_a_hash_map_sized_to_its_entries() -> None:
    """clusterAclConfigVersion's file versions: copied into new HashMap(size, 1)."""
    for n, expected in SIZED_ORDERS.items():
        filled = java_hashmap_order(f"k{i}x" for i in range(n))
        assert java_hash_order(filled, java_string_hash, sized=n) == expected, n
