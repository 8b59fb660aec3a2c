"""The draft tree a synthetic verify step checks: parents, depths, mask rows, retrieve links.

Node 0 is the root (the last verified token); node i > 0 hangs under node
(i - 1) // topk, so topk = 1 is EAGLE's chain and topk > 1 a breadth-first
topk-ary tree of k nodes. The mask row of node i marks its ancestors and itself,
which is what EAGLE's tree kernel writes after the all-True prefix columns.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmark.core.errors import BenchError


@dataclass(frozen=True)
class DraftTree:
    parents: tuple[int, ...]  # parents[0] == -1

    @property
    def size(self) -> int:
        return len(self.parents)

    def depth(self, node: int) -> int:
        d = 0
        while self.parents[node] >= 0:
            node = self.parents[node]
            d += 1
        return d

    @property
    def depths(self) -> list[int]:
        return [self.depth(i) for i in range(self.size)]

    @property
    def max_depth(self) -> int:
        return max(self.depths)

    def mask_rows(self) -> list[list[bool]]:
        """rows[i][j]: node i attends to draft node j (j is i or an ancestor of i)."""
        rows = []
        for i in range(self.size):
            row = [False] * self.size
            node = i
            while node >= 0:
                row[node] = True
                node = self.parents[node]
            rows.append(row)
        return rows

    def flat_mask(self, ctx: int) -> list[bool]:
        """One request's FULL_MASK layout: k rows of [True] * ctx + the tree row."""
        out: list[bool] = []
        for row in self.mask_rows():
            out += [True] * ctx + row
        return out

    def next_token(self) -> list[int]:
        """First child of each node, -1 for leaves (EAGLE's retrieve_next_token)."""
        first = [-1] * self.size
        for child in range(self.size - 1, 0, -1):
            first[self.parents[child]] = child
        return first

    def next_sibling(self) -> list[int]:
        """Next node with the same parent, -1 for the last (EAGLE's retrieve_next_sibling)."""
        sibling = [-1] * self.size
        last_child: dict[int, int] = {}
        for child in range(1, self.size):
            parent = self.parents[child]
            if parent in last_child:
                sibling[last_child[parent]] = child
            last_child[parent] = child
        return sibling


def draft_tree(k: int, topk: int) -> DraftTree:
    if k < 1 or topk < 1:
        raise BenchError(f"draft tree of k={k} topk={topk}: both must be >= 1")
    return DraftTree(tuple([-1] + [(i - 1) // topk for i in range(1, k)]))
