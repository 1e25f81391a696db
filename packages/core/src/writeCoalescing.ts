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
 * last flushed (0: not corked): the tick's first socket in two variables (a process writes to one Redis socket in
 * almost every tick), any others in a map. One microtask ends the tick for all of them, queued on a settled
 * promise: Node's `queueMicrotask` makes an async resource and a bound function per call, which at one call per
 * tick cost more than the rest of this.
 */
let first: Corkable | undefined = undefined
let firstHeld = 0
const others = new Map<Corkable, number>()
const settled = Promise.resolve()
const endTick = (): void => {
  if (firstHeld > 0) first!.uncork()
  first = undefined
  firstHeld = 0
  if (others.size === 0) return
  for (const [stream, held] of others) if (held > 0) stream.uncork()
  others.clear()
}

/** The count of writes held on `stream` after one more, which had `held` (corking it on its second write). */
const hold = (stream: Corkable, held: number): number => {
  if (held === 0) {
    if (!stream.writable) return 0
    stream.cork()
    return 1
  }
  if (held < COALESCE_AT_MOST) return held + 1
  // flush what is held and keep corking the rest of the tick
  stream.uncork()
  stream.cork()
  return 1
}

/** Call just before writing one call to `stream`: see the module's description. */
export const beforeWrite = (stream: Corkable): void => {
  if (first === undefined) {
    first = stream
    settled.then(endTick)
  } else if (stream === first) {
    firstHeld = hold(stream, firstHeld)
  } else {
    const held = others.get(stream)
    others.set(stream, held === undefined ? 0 : hold(stream, held))
  }
}
