"""Command templates parsed as the shell reads them: their placeholders, each value quoted once, and the
templates no quoting can make safe refused with the option's name."""

from __future__ import annotations

import shlex

import pytest

from rerank.errors import RerankError
from rerank.tune.templates import Template

KNOWN = ("nbest", "command", "weights_overwrite")


def test_the_names_are_the_placeholders_the_template_uses() -> None:
    template = Template("moses -n-best-list {nbest} 100 {weights_overwrite} ${HOME} \\{nbest}", "--decoder", KNOWN)
    assert template.names == {"nbest", "weights_overwrite"}  # ${HOME} is the shell's; \{ is escaped
    assert shlex.split(template.render({"nbest": "a b.gz", "weights_overwrite": ["-weight-overwrite", "LM0= 1"]})
                       ) == ["moses", "-n-best-list", "a b.gz", "100", "-weight-overwrite", "LM0= 1", "${HOME}",
                             "{nbest}"]


def test_a_command_is_one_word_where_the_template_quotes_it() -> None:
    command = ["sh", "/w/it's.sh"]
    assert shlex.split(Template("srun {command}", "--submit", KNOWN).render({"command": command})) == ["srun", *command]
    quoted = Template('srun sh -c "{command}"', "--submit", KNOWN).render({"command": command})
    assert shlex.split(quoted) == ["srun", "sh", "-c", shlex.join(command)]


def test_unknown_or_missing_placeholders_and_nul_bytes_are_refused() -> None:
    with pytest.raises(RerankError, match=r"^--decoder: unknown placeholder \{nbets\}; known: \{nbest\}, \{command\}"):
        Template("moses {nbets}", "--decoder", KNOWN)
    template = Template("moses {nbest}", "--decoder", KNOWN)
    with pytest.raises(RerankError, match=r"^--decoder: no value for \{nbest\}$"):
        template.render({})
    with pytest.raises(RerankError, match=r"^--decoder: the value of \{nbest\} holds a NUL byte"):
        template.render({"nbest": "a\0b"})


@pytest.mark.parametrize("text", ["sh <<EOF\nmoses {nbest}\nEOF\n", "sh <<-'END'\n\tcat {nbest}\n\tEND\n"])
def test_a_placeholder_in_a_here_document_is_refused(text: str) -> None:
    with pytest.raises(RerankError, match=r"^--decoder: the placeholder \{nbest\} is in the body of a here-document"):
        Template(text, "--decoder", KNOWN)


def test_a_placeholder_after_a_here_document_is_a_placeholder() -> None:
    template = Template("cat <<EOF\n$HOME {x\nEOF\nmoses {nbest}", "--decoder", KNOWN)
    assert template.names == {"nbest"}
    assert template.render({"nbest": "a b"}).endswith("moses 'a b'")
