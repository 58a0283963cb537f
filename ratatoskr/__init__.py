"""ratatoskr: the durable memory and affect provider Worldtree calls over Bifrost."""

__version__ = "0.1.0"
