"""How one rank moves messages: MVAPICH2-GDR 2.0's eager and rendezvous protocols over verbs.

The sender chooses by the size ``x`` and where its buffer is (000 section 4; thresholds are
:class:`~.params.MPIParams` fields named after MVAPICH2's variables):

- **eager** when ``x <= MV2_IBA_EAGER_THRESHOLD`` and, for a GPU buffer with GPUDirect RDMA,
  ``x <= MV2_GPUDIRECT_LIMIT``: one SEND into an eager buffer (vbuf) the receiver pre-posted.
  Its data comes straight from the GPU by GPUDirect RDMA (``eager-gdr``), from a vbuf the GPU
  copied it to with ``cudaMemcpy`` when GPUDirect RDMA is off (``eager-staged``), or from host
  memory (``eager``: inline up to ``MV2_MAX_INLINE_SIZE``, else copied to a vbuf first).
  The receiver copies it out of the vbuf once matched: ``memcpy`` to host memory, an HCA
  loopback copy to GPU memory up to ``MV2_USE_GPUDIRECT_LOOPBACK_LIMIT``, else ``cudaMemcpy``.
- **rendezvous** otherwise (RPUT): the sender sends a request to send (RTS); the matched
  receiver answers clear to send (CTS) with a target; the sender RDMA-writes the data there,
  each block with immediate data that tells the receiver it has landed.  A GPU source above
  ``MV2_GPUDIRECT_LIMIT`` is staged to host memory by ``cudaMemcpy`` (started at once, before
  the CTS); a GPU destination above ``MV2_USE_GPUDIRECT_RECEIVE_LIMIT`` (or without GPUDirect
  RDMA) gets its data in host staging and ``cudaMemcpy`` moves it on.  With staging on either
  side the message moves in ``MV2_CUDA_BLOCK_SIZE`` blocks, so copies and the network overlap
  (the pipeline above 256 KB of 000 section 4).

Every action runs on the fabric's event engine at its simulated time; the host CPU's share (a
completion handled, a synchronous copy) is serialised on the rank's CPU (``Rank.cpu``).
"""

from peach2.sim.verbs import Access, Opcode, RecvWR, SendWR, WCOpcode
from peach2.sim.verbs import Status as WCStatus

from . import wire
from .cq import EventCQ
from .request import Envelope, Status

__all__ = ["Protocol"]

_RW = Access.LOCAL_WRITE | Access.REMOTE_WRITE


class Protocol:
    """The messaging engine of one :class:`~.rank.Rank`: queue pairs, vbufs, eager, rendezvous.

    Members
    -------
    rank : Rank
        Its rank.
    cq : EventCQ
        The one completion queue of all its queue pairs.
    """

    def __init__(self, rank):
        self.rank = rank
        self.node = rank.node
        self.hca = rank.hca
        self.params = rank.params
        self.fabric = rank.world.fabric
        self.port = rank.rank
        self.cq = EventCQ(self.fabric, self.port, self._on_wc)
        # MVAPICH2 registers what it touches (registration cache); here every memory once
        self._regions = {m.name: self.hca.reg_mr(m.base, m.size, _RW) for m in self.node.memories}
        self._qp = {}               # peer rank -> QueuePair
        self._peer_of = {}          # qp_num -> peer rank
        self._vbufs = []            # free eager buffers (host memory of the rank's socket)
        self._recv_vbuf = {}        # receive wr_id -> vbuf
        self._on_send = {}          # send wr_id -> callback(wc) or None
        self._sends = {}            # sender request id -> Request
        self._recvs = {}            # receiver request id -> Request
        self._next_wr = 1
        self._next_id = 1

    # -- connections and buffers -------------------------------------------------------------

    def connection(self, peer):
        """The queue pair to ``peer``, connected on first use (no set-up cost is modelled)."""
        if peer not in self._qp:
            self.rank.world.connect(self.rank.rank, peer)
        return self._qp[peer]

    def attach(self, peer, qp):
        """Adopt ``qp`` (connected to ``peer``) and pre-post ``MV2_PREPOST_DEPTH`` receives."""
        self._qp[peer] = qp
        self._peer_of[qp.qp_num] = peer
        for _ in range(self.params.MV2_PREPOST_DEPTH):
            self._post_vbuf(qp)

    def _post_vbuf(self, qp):
        vbuf = self._vbufs.pop() if self._vbufs else self.node.alloc(self.rank.home,
                                                                     self.params.vbuf_bytes)
        wr_id = self._wr_id()
        self._recv_vbuf[wr_id] = vbuf
        self.hca.post_recv(self.fabric.now, qp, RecvWR(wr_id, vbuf, self.params.vbuf_bytes,
                                                       self._key(vbuf).lkey))

    def _vbuf(self):
        return self._vbufs.pop() if self._vbufs else self.node.alloc(self.rank.home,
                                                                     self.params.vbuf_bytes)

    def _release(self, vbuf):
        self._vbufs.append(vbuf)

    def _key(self, addr):
        return self._regions[self.node.locate(addr).name]

    def _wr_id(self, callback=None):
        wr_id = self._next_wr
        self._next_wr += 1
        self._on_send[wr_id] = callback
        return wr_id

    def _new_id(self, table, req):
        while self._next_id in table or self._next_id == 0:
            self._next_id = (self._next_id + 1) & wire.FIELD_MASK
        req.id = self._next_id
        table[req.id] = req
        self._next_id = (self._next_id + 1) & wire.FIELD_MASK
        return req.id

    def _at(self, t_ps, fn, *args):
        self.fabric.schedule(t_ps, self.port, fn, *args)

    def _post(self, qp, wr):
        self.hca.post_send(self.fabric.now, qp, wr)

    @staticmethod
    def blocks(nbytes, block):
        """``(offset, length)`` of each pipeline block (one block when ``block`` is falsy)."""
        if not block:
            return [(0, nbytes)]
        return [(off, min(block, nbytes - off)) for off in range(0, nbytes, block)]

    # -- sending -------------------------------------------------------------------------------

    def start_send(self, req):
        """Start sending ``req`` now (scheduled by ``Rank.isend`` after its call overhead)."""
        p = self.params
        x = req.count
        if req.peer == self.rank.rank:
            req.protocol = "self"
            self.rank.arrived(Envelope(req.peer, req.tag, x, "self", "self", sreq=req,
                                       context=req.context))
            return
        qp = self.connection(req.peer)
        if x <= p.MV2_IBA_EAGER_THRESHOLD and (
                not req.device or not p.gdr or x <= p.MV2_GPUDIRECT_LIMIT):
            self._eager(req, qp)
        else:
            self._rendezvous(req, qp)

    def _eager(self, req, qp):
        p = self.params
        x = req.count
        now = self.fabric.now
        imm = wire.imm(wire.EAGER, req.tag, req.context)
        if req.device and p.gdr:
            req.protocol = "eager-gdr"          # the HCA reads the GPU by GPUDirect RDMA
            self._post(qp, SendWR(self._wr_id(lambda wc: self._sent(req)), Opcode.SEND,
                                  req.addr, x, self._key(req.addr).lkey, imm=imm))
            return
        if not req.device and x <= p.MV2_MAX_INLINE_SIZE:
            req.protocol = "eager"              # the CPU writes it into the work request
            self._post(qp, SendWR(self._wr_id(), Opcode.SEND, imm=imm,
                                  inline_data=self.node.load(req.addr, x)))
            self._sent(req)
            return
        vbuf = self._vbuf()
        req.protocol = "eager-staged" if req.device else "eager"
        t = self.node.copy(now, vbuf, req.addr, x)       # cudaMemcpy or memcpy, synchronous
        self.rank.block_cpu(t)
        self._at(t, self._eager_go, req, qp, vbuf, imm)

    def _eager_go(self, req, qp, vbuf, imm):
        x = req.count
        if x <= self.params.MV2_MAX_INLINE_SIZE:
            self._post(qp, SendWR(self._wr_id(), Opcode.SEND, imm=imm,
                                  inline_data=self.node.load(vbuf, x)))
            self._release(vbuf)
        else:
            self._post(qp, SendWR(self._wr_id(lambda wc: self._release(vbuf)), Opcode.SEND,
                                  vbuf, x, self._key(vbuf).lkey, imm=imm))
        self._sent(req)

    def _sent(self, req):
        self.rank.complete(req, Status(req.peer, req.tag, req.count, req.protocol))

    def _rendezvous(self, req, qp):
        p = self.params
        x = req.count
        now = self.fabric.now
        self._new_id(self._sends, req)
        self._post(qp, SendWR(self._wr_id(), Opcode.SEND,
                              imm=wire.imm(wire.RTS, req.tag, req.context),
                              inline_data=wire.rts(req.id, x)))
        req.protocol = "rndv"
        if not req.device or (p.gdr and x <= p.MV2_GPUDIRECT_LIMIT):
            req.src_addr = req.addr                 # written straight from the user buffer
            return
        # stage the GPU data to host memory block by block, starting now (before the CTS)
        req.protocol = "rndv-staged"
        req.block = p.MV2_CUDA_BLOCK_SIZE
        req.staging = req.src_addr = self.node.alloc(self.rank.home, x)
        blocks = self.blocks(x, req.block)
        req.ready = [False] * len(blocks)
        for k, (off, n) in enumerate(blocks):
            t = self.node.copy(now, req.staging + off, req.addr + off, n)
            self._at(t, self._staged, req, k)

    def _staged(self, req, k):
        req.ready[k] = True
        self._push(req)

    def _on_cts(self, sid, rid, target, rkey, block):
        req = self._sends.get(sid)
        if req is None:
            raise RuntimeError(f"rank {self.rank.rank}: CTS for unknown send {sid}")
        req.target = (target, rkey, rid)
        if req.block is None and block:
            req.block = block
        if req.ready is None:
            req.ready = [True] * len(self.blocks(req.count, req.block))
        if len(req.ready) > 1:
            req.protocol += "-pipelined"
        self._push(req)

    def _push(self, req):
        if req.target is None:
            return
        target, rkey, rid = req.target
        blocks = self.blocks(req.count, req.block)
        qp = self._qp[req.peer]
        while req.posted < len(blocks) and req.ready[req.posted]:
            off, n = blocks[req.posted]
            req.posted += 1
            self._post(qp, SendWR(self._wr_id(lambda wc, n=n: self._written(req, n)),
                                  Opcode.RDMA_WRITE, req.src_addr + off, n,
                                  self._key(req.src_addr).lkey, remote_addr=target + off,
                                  rkey=rkey, imm=wire.imm(wire.DATA, rid)))

    def _written(self, req, n):
        req.moved += n
        if req.moved == req.count:
            del self._sends[req.id]
            if req.staging is not None:
                self.node.free(req.staging)
                req.staging = None
            self._sent(req)

    # -- receiving -----------------------------------------------------------------------------

    def deliver(self, env, req):
        """Move matched message ``env`` into receive ``req`` (called when they match)."""
        req.size = env.size
        req.envelope = env
        if env.kind == "self":
            t = self.node.copy(self.fabric.now, req.addr, env.sreq.addr, env.size) \
                if env.size else self.fabric.now
            self.rank.block_cpu(t)
            self._at(t, self._self_done, env, req)
        elif env.kind == "eager":
            self._copy_out(env, req)
        else:
            self._clear_to_send(env, req)

    def _self_done(self, env, req):
        self._sent(env.sreq)
        self._received(req, "self")

    def _received(self, req, protocol):
        env = req.envelope
        req.protocol = protocol
        self.rank.complete(req, Status(env.src, env.tag, env.size, protocol))

    def _copy_out(self, env, req):
        p = self.params
        x = env.size
        now = self.fabric.now
        if x == 0:
            self._eager_done(env, req, "eager")
        elif not req.device:
            t = self.node.memcpy(now, req.addr, env.vbuf, x)
            self.rank.block_cpu(t)
            self._at(t, self._eager_done, env, req, "eager")
        elif p.gdr and x <= p.MV2_USE_GPUDIRECT_LOOPBACK_LIMIT:
            self._loopback(now, req.addr, env.vbuf, x, self._eager_done, env, req,
                           "eager-loopback")
        else:
            t = self.node.copy(now, req.addr, env.vbuf, x)
            self.rank.block_cpu(t)
            self._at(t, self._eager_done, env, req, "eager-staged")

    def _eager_done(self, env, req, protocol):
        self._release(env.vbuf)
        self._received(req, protocol)

    def _loopback(self, t, dst, src, nbytes, fn, *args):
        """The HCA copies host -> GPU by itself (MVAPICH2-GDR's loopback design)."""
        self._at(t + self.hca.params.doorbell_ps, self._loopback_read, dst, src, nbytes, fn, args)

    def _loopback_read(self, dst, src, nbytes, fn, args):
        mtu = self.hca.params.mtu
        state = [-(-nbytes // mtu), 0]              # chunks left, last write done
        for off in range(0, nbytes, mtu):
            self.hca.dma.start_read(self.fabric.now, src + off, min(mtu, nbytes - off),
                                    lambda t, data, at=dst + off:
                                    self._loopback_read_done(t, at, data, state, fn, args))

    def _loopback_read_done(self, t, dst, data, state, fn, args):
        if data is None:
            raise RuntimeError(f"rank {self.rank.rank}: the HCA's loopback read for "
                               f"{dst:#x} was refused by the bus")
        self._at(t, self._loopback_write, dst, data, state, fn, args)

    def _loopback_write(self, dst, data, state, fn, args):
        self.hca.dma.start_write(self.fabric.now, dst, data,
                                 lambda t: self._loopback_written(t, state, fn, args))

    def _loopback_written(self, t, state, fn, args):
        state[1] = max(state[1], t)
        state[0] -= 1
        if state[0] == 0:
            self._at(state[1] + self.hca.params.cqe_ps + self.params.loopback_ps, fn, *args)

    def _clear_to_send(self, env, req):
        p = self.params
        x = env.size
        self._new_id(self._recvs, req)
        req.protocol = "rndv"
        if not req.device or (p.gdr and x <= p.MV2_USE_GPUDIRECT_RECEIVE_LIMIT):
            target, block = req.addr, 0             # written straight into the user buffer
        else:
            req.protocol = "rndv-staged"
            req.staging = target = self.node.alloc(self.rank.home, x)
            block = p.MV2_CUDA_BLOCK_SIZE
        qp = self.connection(env.src)
        self._post(qp, SendWR(self._wr_id(), Opcode.SEND, imm=wire.imm(wire.CTS),
                              inline_data=wire.cts(env.sid, req.id, target,
                                                   self._key(target).rkey, block)))

    def _on_data(self, rid, nbytes):
        req = self._recvs.get(rid)
        if req is None:
            raise RuntimeError(f"rank {self.rank.rank}: data for unknown receive {rid}")
        off = req.moved
        req.moved += nbytes
        req.posted += 1                              # blocks seen
        if req.staging is None:
            self._landed(req, nbytes)
            return
        t = self.node.copy(self.fabric.now, req.addr + off, req.staging + off, nbytes)
        self._at(t, self._landed, req, nbytes)

    def _landed(self, req, nbytes):
        req.landed += nbytes
        if req.landed < req.size:
            return
        del self._recvs[req.id]
        if req.staging is not None:
            self.node.free(req.staging)
            req.staging = None
        self._received(req, req.protocol + ("-pipelined" if req.posted > 1 else ""))

    # -- completions -----------------------------------------------------------------------------

    def _on_wc(self, wc):
        if wc.status is not WCStatus.SUCCESS:
            raise RuntimeError(f"rank {self.rank.rank}: work completion failed, {wc} "
                               f"(the MPI layer never posts such a request: a model error)")
        self._at(self.rank.cpu(self.fabric.now, self.params.progress_ps), self._handle, wc)

    def _handle(self, wc):
        if wc.opcode in (WCOpcode.SEND, WCOpcode.RDMA_WRITE):
            callback = self._on_send.pop(wc.wr_id)
            if callback is not None:
                callback(wc)
            return
        vbuf = self._recv_vbuf.pop(wc.wr_id)
        peer = self._peer_of[wc.qp_num]
        self._post_vbuf(self._qp[peer])              # keep the receive queue full
        kind, field = wire.split(wc.imm)
        context = wire.context_of(wc.imm)
        if kind == wire.EAGER:
            self.rank.arrived(Envelope(peer, field, wc.byte_len, "eager", "eager", vbuf=vbuf,
                                       context=context))
            return
        payload = self.node.load(vbuf, wc.byte_len)
        self._release(vbuf)
        if kind == wire.RTS:
            sid, size = wire.parse_rts(payload)
            self.rank.arrived(Envelope(peer, field, size, "rts", "rndv", sid=sid,
                                       context=context))
        elif kind == wire.CTS:
            self._on_cts(*wire.parse_cts(payload))
        else:
            self._on_data(field, wc.byte_len)
