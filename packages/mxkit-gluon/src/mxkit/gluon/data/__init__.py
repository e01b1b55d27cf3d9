"""Gluon's data loading (``mx.gluon.data``): datasets, samplers and ``DataLoader``."""

from mxkit.gluon.data import vision
from mxkit.gluon.data.dataloader import DataLoader, default_batchify_fn
from mxkit.gluon.data.dataset import ArrayDataset, Dataset, RecordFileDataset, SimpleDataset
from mxkit.gluon.data.sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler
from mxkit.gluon.data.worker_pool import WorkerError

__all__ = ["ArrayDataset", "BatchSampler", "DataLoader", "Dataset", "RandomSampler", "RecordFileDataset", "Sampler",
           "SequentialSampler", "SimpleDataset", "WorkerError", "default_batchify_fn", "vision"]
