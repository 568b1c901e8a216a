"""Comment bodies that try to run script: each must be stored as typed and rendered inert."""

PAYLOADS = [
    "<script>window.__xss = 1; alert('script tag')</script>",
    "<SCRIPT SRC=//evil.example/x.js></SCRIPT>",
    "[click me](javascript:window.__xss=1;alert('js link'))",
    "[spaced](  javascript:alert(1) )",
    "[encoded](jav&#x09;ascript:alert(1))",
    "[data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "<a href=\"javascript:alert(1)\">raw link</a>",
    "<img src=x onerror=\"window.__xss=1;alert('img onerror')\">",
    "<div onmouseover=\"alert(1)\" id=\"xss-div\">hover</div>",
    "<svg onload=\"window.__xss=1;alert('svg')\"><circle r=10 /></svg>",
    "<svg><script>alert('svg script')</script></svg>",
    "![img trick](x\" onerror=\"alert(1))",
    "![x](javascript:alert('image src'))",
    "![x](https://evil.example/track.png \"title\\\" onerror=\\\"alert(1)\")",
    "[x](https://example.org \"a\\\" onmouseover=\\\"alert(1)\")",
    "<iframe src=\"javascript:alert(1)\"></iframe>",
    "<style>body{display:none}</style>",
    "`<script>alert('in code')</script>`",
    "```html\n<script>alert('in fence')</script>\n```",
    "<<script>script>alert(1)<</script>/script>",
    "<details open ontoggle=alert(1)>",
    "\"><script>alert('attribute break')</script>",
    "{{ 7*7 }} {% raw %} jinja",
]


def unsafe_markup(fragment: str) -> list[str]:
    """Return what in an HTML fragment could run script: unknown tags, on* attributes, non-http(s) links."""
    from html.parser import HTMLParser
    from urllib.parse import urlsplit

    allowed_tags = {"p", "br", "hr", "strong", "em", "code", "pre", "blockquote", "ul", "ol", "li", "a",
                    "h1", "h2", "h3", "h4", "h5", "h6"}  # fmt: skip
    problems: list[str] = []

    class Checker(HTMLParser):
        def handle_starttag(self, tag, attrs):
            if tag not in allowed_tags:
                problems.append(f"tag <{tag}>")
            for name, value in attrs:
                if name.startswith("on") or name in ("style", "src", "srcdoc", "formaction"):
                    problems.append(f"attribute {name}={value!r}")
                # relative links (no scheme, as a browser parses it) are harmless: they stay on this site
                if name == "href" and urlsplit(value or "").scheme not in ("http", "https", "mailto", ""):
                    problems.append(f"href={value!r}")

    Checker().feed(fragment)
    return problems
