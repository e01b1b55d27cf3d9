"""``mxkit rec verify``/``rec index`` and ``mxkit im2rec`` against MXNet's im2rec tool."""

from __future__ import annotations

import argparse
import shutil

import numpy as np
import pytest
from mxkit.core.errors import ConfigError, FormatError
from mxkit.io import recordio
from mxkit.io.im2rec import PackOptions, make_list, pack_list, read_list
from mxkit_io_test_helpers import FIXTURES, generators


def run_cli(*argv):
    # The commands live in the facade (mxkit); mxkit-io installed alone tests the functions.
    cli_io = pytest.importorskip("mxkit.mx.cli_io", reason="the mxkit facade is not installed")
    parser = argparse.ArgumentParser(prog="mxkit")
    cli_io.add_io_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args([str(a) for a in argv])
    return args.run(args)


@pytest.fixture
def image_folder(tmp_path):
    """The folder MXNet's im2rec ran on, rebuilt from the image records."""
    reader = recordio.MXIndexedRecordIO(str(FIXTURES / "mxnet_images.idx"), str(FIXTURES / "mxnet_images.rec"), "r")
    payloads = [recordio.unpack(reader.read_idx(i))[1] for i in range(8)]
    root = tmp_path / "images"
    generators.write_image_folder(root, payloads)
    return root


def test_im2rec_lists_match_mxnet(image_folder, tmp_path, capsys):
    prefix = tmp_path / "mxnet_im2rec"
    assert run_cli("im2rec", prefix, image_folder, "--list", "--recursive", "--train-ratio", "0.75") == 0
    for name in ("mxnet_im2rec_train.lst", "mxnet_im2rec_val.lst"):
        assert (tmp_path / name).read_text() == (FIXTURES / name).read_text()
    assert "wrote" in capsys.readouterr().out


@pytest.mark.parametrize("workers", [1, 2])
def test_im2rec_pass_through_is_byte_identical(image_folder, tmp_path, workers):
    shutil.copy(FIXTURES / "mxnet_im2rec_train.lst", tmp_path / "train.lst")
    assert pack_list(str(tmp_path / "train.lst"), PackOptions(str(image_folder), pass_through=True), workers) == (6, 0)
    assert (tmp_path / "train.rec").read_bytes() == (FIXTURES / "mxnet_im2rec_train.rec").read_bytes()
    assert (tmp_path / "train.idx").read_text() == (FIXTURES / "mxnet_im2rec_train.idx").read_text()


def test_make_list_matches_mxnet(image_folder, tmp_path):
    written = make_list(str(tmp_path / "mxnet_im2rec"), str(image_folder), recursive=True, train_ratio=0.75)
    assert sorted(written) == sorted(str(tmp_path / n) for n in ("mxnet_im2rec_train.lst", "mxnet_im2rec_val.lst"))
    for name in ("mxnet_im2rec_train.lst", "mxnet_im2rec_val.lst"):
        assert (tmp_path / name).read_text() == (FIXTURES / name).read_text()
    with pytest.raises(ConfigError, match="must be fractions summing to at most 1"):
        make_list(str(tmp_path / "x"), str(image_folder), train_ratio=0.8, test_ratio=0.5)


@pytest.mark.parametrize("workers", [1, 2])
def test_cli_im2rec_pass_through(image_folder, tmp_path, workers):
    shutil.copy(FIXTURES / "mxnet_im2rec_train.lst", tmp_path / "train.lst")
    assert run_cli("im2rec", tmp_path / "train.lst", image_folder, "--pass-through", "--num-thread", workers) == 0
    assert (tmp_path / "train.rec").read_bytes() == (FIXTURES / "mxnet_im2rec_train.rec").read_bytes()
    assert (tmp_path / "train.idx").read_text() == (FIXTURES / "mxnet_im2rec_train.idx").read_text()


def test_im2rec_resize_center_crop_png_matches_mxnet_pixels(image_folder, tmp_path):
    pytest.importorskip("cv2")
    shutil.copy(FIXTURES / "mxnet_im2rec_all.lst", tmp_path / "all.lst")
    assert run_cli("im2rec", tmp_path / "all", image_folder, "--resize", "20", "--center-crop",
                   "--encoding", ".png", "--quality", "3", "--num-thread", "2") == 0
    ours = recordio.MXIndexedRecordIO(str(tmp_path / "all.idx"), str(tmp_path / "all.rec"), "r")
    theirs = recordio.MXIndexedRecordIO(str(FIXTURES / "mxnet_im2rec_all.idx"), str(FIXTURES / "mxnet_im2rec_all.rec"),
                                        "r")
    assert ours.keys == theirs.keys
    for key in theirs.keys:
        header, img = recordio.unpack_img(ours.read_idx(key))
        ref_header, ref_img = recordio.unpack_img(theirs.read_idx(key))
        assert header == ref_header and img.shape == ref_img.shape == (20, 20, 3)
        np.testing.assert_array_equal(img, ref_img)


def test_im2rec_skips_unreadable_images_with_a_warning(tmp_path, image_folder, capsys):
    pytest.importorskip("cv2")
    (tmp_path / "broken.lst").write_text("0\t1.000000\tclass_0/notes.txt\n1\t0.000000\tclass_0/img_0.jpg\n")
    written, skipped = pack_list(str(tmp_path / "broken.lst"), PackOptions(root=str(image_folder)))
    assert (written, skipped) == (1, 1)
    assert "skipping list index 0: cannot decode" in capsys.readouterr().err
    (tmp_path / "bad.lst").write_text("0\tclass_0/img_0.jpg\n")
    with pytest.raises(FormatError, match="line 1"):
        list(read_list(str(tmp_path / "bad.lst")))
    with pytest.raises(ConfigError, match=r"no \.lst file with prefix"):
        run_cli("im2rec", tmp_path / "nothing", image_folder)


def test_rec_verify_and_index(tmp_path, capsys):
    rec = tmp_path / "data.rec"
    rec.write_bytes((FIXTURES / "mxnet_indexed.rec").read_bytes())
    assert run_cli("rec", "index", rec) == 0
    assert (tmp_path / "data.idx").read_text() == (FIXTURES / "mxnet_indexed.idx").read_text()
    assert run_cli("rec", "verify", rec) == 0
    assert "12 intact records" in capsys.readouterr().out
    damaged = bytearray(rec.read_bytes())
    index_lines = (tmp_path / "data.idx").read_text().splitlines()
    before, offset = (int(index_lines[i].split("\t")[1]) for i in (3, 4))
    damaged[offset + 1] ^= 0x40
    rec.write_bytes(bytes(damaged))
    assert run_cli("rec", "verify", rec) == 1
    out = capsys.readouterr().out
    # the record before the damaged header cannot prove its own length: not counted intact
    assert f"offset {offset}: bad magic" in out and f"after the record at byte offset {before}" in out
    assert "10 intact records" in out
    assert f"points at byte {offset}, not at an intact record head" in out
    assert run_cli("rec", "index", rec, "--idx", tmp_path / "fixed.idx") == 1
    # (the record before the damage cannot prove its length: it is left out too)
    assert len((tmp_path / "fixed.idx").read_text().splitlines()) == 10


def test_make_list_chunks_and_three_way_split(image_folder, tmp_path):
    written = make_list(str(tmp_path / "p"), str(image_folder), recursive=True, train_ratio=0.5, test_ratio=0.25,
                        chunks=2)
    names = sorted(p.rsplit("/", 1)[-1] for p in written)
    assert names == ["p_0_test.lst", "p_0_train.lst", "p_0_val.lst", "p_1_test.lst", "p_1_train.lst", "p_1_val.lst"]
    items = [item for path in written for item in read_list(path)]
    assert sorted(item.index for item in items) == list(range(8))  # every image once
    assert {item.path for item in items} == {f"class_{i % 3}/img_{i}{generators.image_format(i)[0]}"
                                             for i in range(8)}
    for item in items:  # the class of an image is its folder's rank
        assert item.labels == (float(item.path.split("/")[0][-1]),)


def test_a_folder_prefix_names_its_own_lst_files_and_the_error_says_so(tmp_path):
    from mxkit.io.im2rec import find_list_files

    images = tmp_path / "images"
    images.mkdir()
    (tmp_path / "images.lst").write_text("0\t0.000000\ta.jpg\n")  # what `--list images images` writes
    with pytest.raises(ConfigError, match=r"MXNet's rule.*images\.lst"):
        find_list_files(str(images))
    assert find_list_files(str(tmp_path / "images.lst")) == [str(tmp_path / "images.lst")]
    (images / "inside.lst").write_text("0\t0.000000\ta.jpg\n")
    assert find_list_files(str(images)) == [str(images / "inside.lst")]
