"""Text data for RNNs: ``encode_sentences`` and the bucketing ``BucketSentenceIter`` (MXNet 1.x)."""

from __future__ import annotations

import bisect
import logging
import random
from collections.abc import Sequence
from typing import Any

import numpy as np
from mxkit.core.errors import MXKitError
from mxkit.io import DataBatch, DataDesc, DataIter

_LOG = logging.getLogger(__name__)


def encode_sentences(sentences: Sequence[Sequence[str]], vocab: dict | None = None, invalid_label: int = -1,
                     invalid_key: str = "\n", start_label: int = 0,
                     unknown_token: str | None = None) -> tuple[list[list[int]], dict]:
    """Words to integer ids, building the vocabulary as it goes.

    Parameters
    ----------
    sentences : list of list of str
    vocab : dict, optional
        An existing word-to-id map; without one a new map is built (``invalid_key`` maps to
        ``invalid_label``) and every new word gets the next id from ``start_label``.
    invalid_label : int
        The padding id, never given to a word.
    unknown_token : str, optional
        With a given ``vocab``, words not in it are encoded as this token.

    Returns
    -------
    (encoded sentences, vocab)
    """
    next_id = start_label
    new_vocab = vocab is None
    if vocab is None:
        vocab = {invalid_key: invalid_label}
    encoded = []
    for sentence in sentences:
        coded = []
        for word in sentence:
            if word not in vocab:
                if not new_vocab and not unknown_token:
                    raise MXKitError(f"unknown token {word!r}: it is not in the given vocab; pass unknown_token= "
                                     f"to map such words to one id")
                if unknown_token:
                    word = unknown_token
                if word not in vocab:
                    if next_id == invalid_label:
                        next_id += 1
                    vocab[word] = next_id
                    next_id += 1
            coded.append(vocab[word])
        encoded.append(coded)
    return encoded, vocab


class BucketSentenceIter(DataIter):
    """Batches of sentences grouped into length buckets, labels the next word (language models).

    Each sentence goes to the smallest bucket that holds it, padded with ``invalid_label``;
    a batch holds sentences of one bucket and carries that bucket's length as ``bucket_key``.

    Parameters
    ----------
    sentences : list of list of int
        Encoded sentences (:func:`encode_sentences`).
    batch_size : int
    buckets : list of int, optional
        Bucket lengths; by default every length with at least ``batch_size`` sentences.
    invalid_label : int, default -1
    data_name, label_name : str
    dtype : str, default 'float32'
    layout : {'NT', 'TN'}
        Batch-major or time-major batches.
    """

    def __init__(self, sentences: Sequence[Sequence[int]], batch_size: int, buckets: list[int] | None = None,
                 invalid_label: int = -1, data_name: str = "data", label_name: str = "softmax_label",
                 dtype: str = "float32", layout: str = "NT") -> None:
        super().__init__(batch_size)
        if not buckets:
            counts = np.bincount([len(s) for s in sentences])
            buckets = [length for length, count in enumerate(counts) if count >= batch_size]
        if not buckets:
            raise MXKitError(f"BucketSentenceIter: no sentence length has batch_size={batch_size} sentences; give "
                             f"buckets= explicitly")
        buckets = sorted(buckets)
        self.major_axis = layout.find("N")
        if layout not in ("NT", "TN"):
            raise MXKitError(f"BucketSentenceIter: invalid layout {layout!r}; must be 'NT' (batch major) or 'TN' "
                             f"(time major)")
        data: list[list[np.ndarray]] = [[] for _ in buckets]
        discarded = 0
        for sentence in sentences:
            bucket = bisect.bisect_left(buckets, len(sentence))
            if bucket == len(buckets):
                discarded += 1
                continue
            padded = np.full((buckets[bucket],), invalid_label, dtype=dtype)
            padded[:len(sentence)] = sentence
            data[bucket].append(padded)
        if discarded:
            _LOG.warning("discarded %d sentences longer than the largest bucket.", discarded)
        self.data = [np.asarray(rows, dtype=dtype).reshape(len(rows), length) for rows, length in zip(data, buckets)]
        self.batch_size = batch_size
        self.buckets = buckets
        self.data_name = data_name
        self.label_name = label_name
        self.dtype = dtype
        self.invalid_label = invalid_label
        self.layout = layout
        self.default_bucket_key = max(buckets)
        shape = (batch_size, self.default_bucket_key) if self.major_axis == 0 else (self.default_bucket_key,
                                                                                    batch_size)
        self._provide_data = [DataDesc(data_name, shape, layout=layout)]
        self._provide_label = [DataDesc(label_name, shape, layout=layout)]
        self.idx = [(i, j) for i, rows in enumerate(self.data)
                    for j in range(0, len(rows) - batch_size + 1, batch_size)]
        self.curr_idx = 0
        self.nddata: list[Any] = []
        self.ndlabel: list[Any] = []
        self.reset()

    @property
    def provide_data(self) -> list[DataDesc]:
        """The default (largest) bucket's data shape."""
        return self._provide_data

    @property
    def provide_label(self) -> list[DataDesc]:
        """The default (largest) bucket's label shape."""
        return self._provide_label

    def reset(self) -> None:
        """Shuffle the batches and the sentences within each bucket."""
        from mxkit import ndarray

        self.curr_idx = 0
        random.shuffle(self.idx)
        for rows in self.data:
            np.random.shuffle(rows)
        self.nddata, self.ndlabel = [], []
        for rows in self.data:
            label = np.empty_like(rows)
            label[:, :-1] = rows[:, 1:]
            label[:, -1] = self.invalid_label
            self.nddata.append(ndarray.array(rows, dtype=self.dtype))
            self.ndlabel.append(ndarray.array(label, dtype=self.dtype))

    def next(self) -> DataBatch:
        """The next batch, with its ``bucket_key`` and per-batch ``provide_data``/``provide_label``."""
        if self.curr_idx == len(self.idx):
            raise StopIteration
        i, j = self.idx[self.curr_idx]
        self.curr_idx += 1
        data = self.nddata[i][j:j + self.batch_size]
        label = self.ndlabel[i][j:j + self.batch_size]
        if self.major_axis == 1:
            data, label = data.T, label.T
        return DataBatch([data], [label], pad=0, bucket_key=self.buckets[i],
                         provide_data=[DataDesc(self.data_name, data.shape, layout=self.layout)],
                         provide_label=[DataDesc(self.label_name, label.shape, layout=self.layout)])


__all__ = ["BucketSentenceIter", "encode_sentences"]
