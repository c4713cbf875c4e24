"""The README's tables name what the toolkit has: every method, attack and dataset, no more."""

from __future__ import annotations

import re
from pathlib import Path

from lightyear.algorithms.attacks import catalogue
from lightyear.data import DATASETS
from lightyear.jobs import registry

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()
TOPOLOGY_WORDS = {"p2p": "peer-to-peer", "star": "star"}


def table_rows(heading: str) -> list[list[str]]:
    section = README.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip("|").split("|") for line in section.splitlines() if line.startswith("| `")]
    return [[cell.strip() for cell in row] for row in rows]


def test_the_methods_table_lists_every_method_with_its_topology():
    listed = {row[0].strip("`"): row[1] for row in table_rows("Methods")}
    assert sorted(listed) == registry.builtin_names()
    for name, topology in listed.items():
        declared = registry.method(name)
        no_exchange = declared.fixed.get("topology") == "none"
        assert topology == ("none" if no_exchange else TOPOLOGY_WORDS[declared.topology]), name


def test_the_attack_list_and_the_datasets_table_are_the_toolkits():
    attacks = re.search(r"`--attack ([a-z_|]+) --attackers K", README).group(1).split("|")
    assert sorted(attacks) == sorted(catalogue.names())
    datasets = [row[0].strip("`").split("`")[0] for row in table_rows("Datasets")]
    assert sorted(datasets) == sorted(DATASETS)


def test_every_page_of_docs_is_reached_from_the_readme():
    docs = Path(__file__).resolve().parents[1] / "docs"
    reached, todo = set(), set(re.findall(r"\]\(docs/([a-z0-9-]+\.md)[#)]", README))
    while todo:
        page = todo.pop()
        reached.add(page)
        todo |= set(re.findall(r"\]\(([a-z0-9-]+\.md)[#)]", (docs / page).read_text())) - reached
    assert {p.name for p in docs.glob("*.md")} <= reached
