"""The documentation holds together: every relative markdown link resolves (file and #anchor), and the
README keeps its shape (the two commands first, then the architecture, at most 200 lines)."""

import pathlib
import re

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
DOCS = sorted([REPO / "README.md", REPO / "CONTRIBUTING.md", *(REPO / "docs").glob("*.md"),
               *(REPO / "roles").glob("*/README.md"), REPO / "lab" / "README.md", REPO / "bench" / "README.md"])

FENCE = re.compile(r"^ {0,3}(```|~~~)")
INLINE_CODE = re.compile(r"`[^`]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$")


def prose_lines(text):
    """(line number, line) of the lines outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def slug(heading):
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces to dashes."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)   # a link in a heading: its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    for _, line in prose_lines(path.read_text()):
        m = HEADING.match(line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(path):
    for number, line in prose_lines(path.read_text()):
        for target in LINK.findall(INLINE_CODE.sub("", line)):   # a `[x](y)` in code is no link
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):   # https:, mailto: ...
                continue
            yield number, target


def test_the_checker_reads_links_anchors_and_code_as_github_does(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Behind SGLang's router: rolling deploys\n## `make demo` shows\n## Tests\n## Tests\n"
                    "[a](other.md#x) and ![img](pic.png) `[not](a-link.md)` [web](https://example.org)\n"
                    "```\n[not](a-link-either.md)\n```\n[b](#tests-1)\n")
    assert anchors(page) == {"behind-sglangs-router-rolling-deploys", "make-demo-shows", "tests", "tests-1"}
    assert list(links(page)) == [(5, "other.md#x"), (5, "pic.png"), (9, "#tests-1")]


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(path):
    broken = []
    for number, target in links(path):
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            broken.append(f"line {number}: {target}: no {dest.relative_to(REPO) if dest.is_relative_to(REPO) else dest}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"line {number}: {target}: no heading #{anchor} in {dest.relative_to(REPO)}")
    assert broken == []


def test_the_readme_opens_with_the_two_commands_then_the_architecture_within_200_lines():
    lines = (REPO / "README.md").read_text().splitlines()
    assert lines[:6] == [
        "# sglang-fleet", "", "```sh",
        "make demo   # lab fleet up (6 Debian servers, one running the real SGLang on its CPU, + a router host, over "
        "SSH) and its model hub, router, deploy (checks, models fetched once and staged, install, "
        "audit, verify), verify through the router, drift, fleet report (table + HTML page)",
        "make test   # lint (yamllint, ansible-lint production, ruff), unit tests, molecule, lab end-to-end tests",
        "```",
    ]
    assert len(lines) <= 200
    sections = [line for line in lines if line.startswith("## ")]
    assert sections[0] == "## Architecture"


def test_every_guide_is_linked_from_the_readme_or_the_docs_index():
    linked = {(REPO / "docs" / t.partition("#")[0]).resolve() for _, t in links(REPO / "docs" / "README.md")}
    linked |= {(REPO / t.partition("#")[0]).resolve() for _, t in links(REPO / "README.md")}
    guides = {p.resolve() for p in (REPO / "docs").glob("*.md")} - {(REPO / "docs" / "README.md").resolve()}
    assert sorted(p.name for p in guides - linked) == []
