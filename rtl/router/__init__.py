"""The PEACH2 router: ingress classification, packet buffers, crossbar, N-port egress."""
