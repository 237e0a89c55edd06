"""Replaces one benchmark's figures in docs/benchmarks.md, between its markers."""


def write_section(name, heading, table, path="docs/benchmarks.md"):
    """Puts `table` between `<!-- NAME:start -->` and `<!-- NAME:end -->`, adding the section
    under `heading` at the end when it is not there yet; prints the table."""
    text = open(path).read()
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    if start not in text:
        text += f"\n## {heading}\n\n{start}\n{end}\n"
    text = text[: text.index(start) + len(start)] + "\n" + table + "\n" + text[text.index(end):]
    open(path, "w").write(text)
    print(table)
