"""Scraping a /metrics endpoint in tests: fetch over HTTP, parse with prometheus_client's own
parser, and sum the samples whose labels include the ones asked for.

    scraped = scrape(port)
    scraped.value("rocketmq_messages_in_total", topic="Orders")
"""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample


@dataclass
class Scraped:
    text: str
    samples: list[Sample]
    families: set[str]  # as the parser names them: a counter without its _total

    def matching(self, name: str, **labels: str) -> list[Sample]:
        return [
            s
            for s in self.samples
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
        ]

    def value(self, name: str, **labels: str) -> float:
        """The sum of the matching samples (0 when there are none)."""
        return sum(s.value for s in self.matching(name, **labels))

    def names(self) -> set[str]:
        return {s.name for s in self.samples}


def scrape(port: int, path: str = "/metrics") -> Scraped:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    families = list(text_string_to_metric_families(text))
    samples = [s for family in families for s in family.samples]
    return Scraped(text, samples, {family.name for family in families})
