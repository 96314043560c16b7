"""A small HTML reader for tests of the web UI's pages: Page(html) parses a page into a tree of
Nodes (tag, attributes, children, text); Page.by_id(id) finds an element."""

from __future__ import annotations

from html.parser import HTMLParser


class Node:
    """An element: tag, attributes, children and the text inside it."""

    def __init__(self, tag: str, attrs: dict[str, str]) -> None:
        self.tag, self.attrs, self.children, self.parts = tag, attrs, [], []

    @property
    def text(self) -> str:
        """The text of this element and its descendants, white space collapsed."""
        return " ".join("".join(self.parts).split())

    def all(self, tag: str | None = None, cls: str | None = None) -> list[Node]:
        """Descendants with this tag and class, in document order."""
        out = []
        for c in self.children:
            if (tag is None or c.tag == tag) and (
                cls is None or cls in c.attrs.get("class", "").split()
            ):
                out.append(c)
            out += c.all(tag, cls)
        return out


VOID = {"input", "meta", "link", "br", "hr", "img", "col", "area", "base", "source", "wbr"}


class Page(HTMLParser):
    """An HTML page as a tree of Nodes; by_id(id) finds an element."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {})
        self.stack = [self.root]
        self.ids: dict[str, Node] = {}
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        n = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(n)
        if "id" in n.attrs:
            self.ids[n.attrs["id"]] = n
        if tag not in VOID:
            self.stack.append(n)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.stack.pop()

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        for n in self.stack:
            n.parts.append(data)

    def by_id(self, id: str) -> Node:
        assert id in self.ids, f"no element #{id}"
        return self.ids[id]
