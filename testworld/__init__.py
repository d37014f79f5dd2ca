"""Test infrastructure: a real etcd + kube-apiserver control plane and pytest helpers."""
