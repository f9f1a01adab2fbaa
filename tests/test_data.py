import http.server
import threading
from collections import Counter
from functools import partial

import pytest
import torch

from gptcore.data import CorpusError, check_trainable, get_batch, split_ids, unknown_warning
from gptcore.texts import decode_corpus, download_tinystories_valid, load_corpus, read_corpus_file
from gptcore.tokenizer import CharTokenizer


def test_tokenizer_is_sorted_characters_and_round_trips():
    tok = CharTokenizer.from_text("hello world")
    assert tok.chars == [" ", "d", "e", "h", "l", "o", "r", "w"]
    assert tok.decode(tok.encode("hello")) == "hello"
    assert CharTokenizer.from_dict(tok.to_dict()).chars == tok.chars


def test_unknown_characters_are_skipped_and_reported():
    tok = CharTokenizer.from_text("abc")
    assert tok.encode("aébzc") == [0, 1, 2]
    assert tok.unknown("aébzcé") == Counter({"é": 2, "z": 1})
    assert unknown_warning(tok.unknown("aébzcé")) == (
        "3 character(s) not in the model's vocabulary were skipped: 'é'×2, 'z'×1")
    assert unknown_warning(tok.unknown("abc")) is None


@pytest.mark.parametrize("raw, message", [
    (b"", "upload.txt is empty"),
    (b"  \n\t ", "contains only whitespace"),
    (b"abc\x00def", "looks binary"),
    (b"caf\xe9", "is not UTF-8 text \\(invalid byte at offset 3\\)"),
    (b"x" * 101, "is 101 bytes, over the limit of 100 bytes"),
])
def test_bad_corpora_get_messages_naming_the_problem(raw, message):
    with pytest.raises(CorpusError, match=message):
        decode_corpus(raw, "upload.txt", max_bytes=100)


def test_missing_and_oversized_files_are_refused_before_reading(tmp_path):
    with pytest.raises(CorpusError, match="no such file"):
        read_corpus_file(tmp_path / "nope.txt")
    for not_a_file in (tmp_path, "/dev/zero"):
        with pytest.raises(CorpusError, match=r"is not a regular file \(a folder or a device\?\)"):
            read_corpus_file(not_a_file)
    big = tmp_path / "big.txt"
    big.write_text("y" * 5000)
    with pytest.raises(CorpusError, match="5,000 bytes, over the limit of 1,000"):
        read_corpus_file(big, max_bytes=1000)


def test_a_corpus_too_short_for_the_context_is_refused():
    with pytest.raises(CorpusError, match="corpus has 100 usable characters; context 128 needs at least 1,300"):
        check_trainable(100, 128)
    check_trainable(1300, 128)


def test_load_corpus_truncates_like_the_tutorial(tmp_path):
    path = tmp_path / "s.txt"
    path.write_text("abcdefghij" * 100)
    corpus = load_corpus(str(path), max_chars=25)
    assert corpus.text == ("abcdefghij" * 3)[:25]
    assert corpus.description == "file s.txt, first 25 chars"


def test_split_is_ninety_ten_and_batches_are_shifted_by_one():
    ids = torch.arange(1000)
    train, val = split_ids(ids)
    assert len(train) == 900 and val[0] == 900
    x, y = get_batch(train, 16, 4, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (4, 16)
    assert torch.equal(y[:, :-1], x[:, 1:]) and torch.equal(y[:, -1], x[:, -1] + 1)


def test_batches_follow_the_tutorials_random_calls():
    data = torch.arange(10_000)
    torch.manual_seed(0)
    ix = torch.randint(len(data) - 128 - 1, (32,))
    expected = torch.stack([data[i:i + 128] for i in ix])
    x, _ = get_batch(data, 128, 32, torch.Generator().manual_seed(0))
    assert torch.equal(x, expected)


@pytest.fixture
def http_server(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    (served / "TinyStoriesV2-GPT4-valid.txt").write_text("Once upon a time.\n<|endoftext|>\n" * 2000)
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def test_download_reports_progress_caches_and_reuses(http_server, tmp_path):
    seen = []
    url = f"{http_server}/TinyStoriesV2-GPT4-valid.txt"
    path = download_tinystories_valid(url, tmp_path / "cache", progress=lambda done, total: seen.append((done, total)))
    size = len("Once upon a time.\n<|endoftext|>\n") * 2000
    assert path.read_text().count("<|endoftext|>") == 2000
    assert seen[-1] == (size, size)
    seen.clear()
    assert download_tinystories_valid(url, tmp_path / "cache", progress=lambda *a: seen.append(a)) == path
    assert seen == []  # served from the cache


def test_failed_download_is_a_clear_error_and_leaves_no_partial_file(http_server, tmp_path):
    with pytest.raises(CorpusError, match="could not download .*missing.txt"):
        download_tinystories_valid(f"{http_server}/missing.txt", tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []


def test_only_the_wanted_prefix_of_a_file_over_the_byte_limit_is_read(tmp_path):
    big = tmp_path / "big.txt"
    big.write_text("a" + "é" * 2999)  # 5,999 bytes: "é" takes two
    with pytest.raises(CorpusError, match="5,999 bytes, over the limit of 5,000"):
        read_corpus_file(big, max_bytes=5000)
    # 4 bytes per wanted character are read: 4,000 bytes end inside an "é", which is dropped, not an error
    assert read_corpus_file(big, max_bytes=5000, max_chars=1000) == "a" + "é" * 1999
    assert load_corpus(str(big), max_chars=700, max_bytes=5000).text == "a" + "é" * 699
    with pytest.raises(CorpusError, match="the first 3,000 characters of .* take more than the limit of 5,000 bytes"):
        read_corpus_file(big, max_bytes=5000, max_chars=3000)  # 5,000 bytes hold only 2,500 of them
    plain = tmp_path / "plain.txt"
    plain.write_text("a" * 6000)  # ASCII: 4,000 characters fit in the 5,000 bytes read
    assert load_corpus(str(plain), max_chars=4000, max_bytes=5000).text == "a" * 4000


def test_an_invalid_byte_inside_a_prefix_is_still_an_error(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"abc\xffdef" * 100)
    with pytest.raises(CorpusError, match="not UTF-8 text .*offset 3"):
        read_corpus_file(bad, max_chars=10)


def test_utf16_unreadable_files_and_nonpositive_sizes_get_clear_messages(tmp_path, monkeypatch):
    utf16 = tmp_path / "u16.txt"
    utf16.write_text("hello world", encoding="utf-16")
    with pytest.raises(CorpusError, match="is UTF-16 text; save it as UTF-8"):
        read_corpus_file(utf16)
    locked = tmp_path / "locked.txt"
    locked.write_text("hello")
    real_open = open

    def deny(path, *args, **kw):
        if str(path) == str(locked):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *args, **kw)
    monkeypatch.setattr("builtins.open", deny)
    with pytest.raises(CorpusError, match=f"cannot read {locked}: Permission denied"):
        read_corpus_file(locked)
    monkeypatch.undo()
    for kw, name in (({"max_chars": 0}, "max_chars"), ({"max_chars": -100}, "max_chars"),
                     ({"builtin_chars": 0}, "builtin_chars")):
        with pytest.raises(CorpusError, match=f"{name} must be at least 1"):
            load_corpus("builtin", **kw)


def test_a_file_in_a_folder_that_cannot_be_entered_is_a_clear_error(tmp_path, monkeypatch):
    from pathlib import Path

    locked = tmp_path / "locked"
    locked.mkdir()
    real_stat = Path.stat

    def deny(self, *args, **kw):  # what stat says of a path under a folder without x permission (as non-root)
        if self.parent == locked:
            raise PermissionError(13, "Permission denied", str(self))
        return real_stat(self, *args, **kw)
    monkeypatch.setattr(Path, "stat", deny)
    with pytest.raises(CorpusError, match=f"cannot read {locked / 'stories.txt'}: Permission denied"):
        read_corpus_file(locked / "stories.txt")
    with pytest.raises(CorpusError, match="no such file"):
        read_corpus_file(tmp_path / "stories.txt" / "x")  # (a file on the way: no such file either)


def test_a_download_cut_short_leaves_no_partial_file(tmp_path):
    class Short(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b"x" * 10)  # and the connection closes

        def log_message(self, *a):
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Short)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(CorpusError, match="stopped after 10 of 1,000 bytes"):
            download_tinystories_valid(f"http://127.0.0.1:{server.server_port}/x.txt", tmp_path / "cache")
    finally:
        server.shutdown()
    assert list((tmp_path / "cache").iterdir()) == []


def test_two_downloads_at_once_each_write_their_own_file(http_server, tmp_path):
    url, cache = f"{http_server}/TinyStoriesV2-GPT4-valid.txt", tmp_path / "cache"
    story = "Once upon a time.\n<|endoftext|>\n" * 10_000  # several reads long
    (tmp_path / "served" / "TinyStoriesV2-GPT4-valid.txt").write_text(story)
    inner = []

    def meanwhile(done, total):  # a second tab downloads the same file while the first is halfway
        if not inner and done < total:
            inner.append(download_tinystories_valid(url, cache))
    path = download_tinystories_valid(url, cache, progress=meanwhile)
    assert inner == [path] and path.read_text() == story
    assert [p.name for p in cache.iterdir()] == [path.name]


def test_a_bpe_corpus_too_short_is_said_in_tokens():
    with pytest.raises(CorpusError, match="corpus has 100 tokens; context 128 needs at least 1,300 so that the 10% "
                                          "validation split still holds one window of 129 tokens"):
        check_trainable(100, 128, chars=False)
