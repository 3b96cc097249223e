"""Text utilities. Prefer these over writing code for simple text statistics."""
import time


def word_count(text: str, unique: bool = False) -> int:
    """Count the words of a text.

    Args:
        text: The text to count.
        unique: Count each distinct word once.
    """
    words = text.split()
    return len(set(w.lower() for w in words)) if unique else len(words)


def slugify(title: str, separator: str = "-") -> str:
    """Turn a title into a URL slug.

    Args:
        title: The title, any case and punctuation.
        separator: What joins the words.
    """
    kept = "".join(c.lower() if c.isalnum() else " " for c in title)
    return separator.join(kept.split())


def count_slowly(n: int, delay_ms: int = 200) -> str:
    """Count to n, reporting each number as it goes (shows streaming progress).

    Args:
        n: Where to stop (at most 100).
        delay_ms: Pause between numbers, in milliseconds.
    """
    import cmdc_tool

    for i in range(1, min(n, 100) + 1):
        cmdc_tool.progress(f"{i}/{n}")
        time.sleep(delay_ms / 1000)
    return f"counted to {n}"


word_count.executionPolicy = "auto"
slugify.executionPolicy = "auto"
count_slowly.executionPolicy = "auto"
