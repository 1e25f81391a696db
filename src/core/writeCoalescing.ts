/**
 * Coalescing the writes one tick makes on a socket (shared by both editions' Redis clients; no `effect`, no
 * `ioredis`: a socket is anything that corks).
 *
 * The first write of a tick goes out at once (a lone call waits for nothing, and the server can start on it);
 * when more follow in the same tick — many fibers resumed together, each sending its next call — the socket is
 * corked, and they leave in one `writev` per {@link COALESCE_AT_MOST} writes and at the end of the tick (once
 * the microtasks queued so far have run), instead of one write syscall each: a syscall costs more than the rest
 * of a call, on both sides. The bytes on the wire and their order are the same; a write waits at most until the
 * end of the current microtask batch.
 */

/** What a socket offers for this: Node's `net.Socket` (and any `Writable`). */
export interface Corkable {
  readonly writable: boolean
  cork(): void
  uncork(): void
}

/**
 * At most this many writes leave in one: the server starts on the first of them while the client is still
 * sending the next, instead of the two taking turns with one batch of everything (measured: 8 to 16 keep both
 * busy; one batch of 64 calls was slower than a write each on a quiet machine).
 */
export const COALESCE_AT_MOST = 16

/**
 * The sockets written to in the current tick, each with the number of writes held on it since it was corked or
 * last flushed (0: not corked); one microtask ends the tick for all of them.
 */
const thisTick = new Map<Corkable, number>()
let endQueued = false
const endTick = (): void => {
  endQueued = false
  for (const [stream, held] of thisTick) if (held > 0) stream.uncork()
  thisTick.clear()
}

/** Call just before writing one call to `stream`: see the module's description. */
export const beforeWrite = (stream: Corkable): void => {
  const held = thisTick.get(stream)
  if (held === undefined) {
    thisTick.set(stream, 0)
    if (!endQueued) {
      endQueued = true
      queueMicrotask(endTick)
    }
  } else if (held === 0) {
    if (!stream.writable) return
    stream.cork()
    thisTick.set(stream, 1)
  } else if (held < COALESCE_AT_MOST) {
    thisTick.set(stream, held + 1)
  } else {
    // flush what is held and keep corking the rest of the tick
    stream.uncork()
    stream.cork()
    thisTick.set(stream, 1)
  }
}
