/**
 * The post's model as a discrete-event simulation. One row is guarded by optimistic concurrency control:
 * a write succeeds only if it carries the version its client read, and then the version increments.
 * The server answers instantly. Each of N clients updates the row once: read, write back; after a failed
 * write it backs off, then reads again.
 *
 * Timing (as in the post's simulator): every message hop takes one draw of the network delay, so an
 * attempt is four hops. A client sends its first read at t = 0. The server reads the version at the
 * instant a read request arrives; the reply takes a hop, the client sends the write at once, and the
 * write request takes a hop; the server applies (or rejects) the write at the instant it arrives; the
 * reply takes a hop. After a failed write reply at time t the client sleeps its backoff and sends the
 * next read, which reaches the server at `t + backoff + hop`.
 */
import type { Delays } from "./backoff.js"

/** The outcome of one run. */
export interface RunResult {
  /** Write requests the server received: the post's "client work" (successes + conflicts). */
  readonly writes: number
  /** Read requests the server received. */
  readonly reads: number
  /** When the last successful write's reply reached its client (ms). */
  readonly completionMs: number
}

/** One run: `clients` clients, hop delays from `hop()`, backoff delays from `delays`. */
export interface RunOptions {
  readonly clients: number
  readonly hop: () => number
  readonly delays: Delays
}

/**
 * Runs the model to completion.
 *
 * Only the server has shared state, so only arrivals at the server are events: a client's handling of a
 * reply depends on nothing but the reply, so it is folded into the server event that caused it. Each
 * client has exactly one request in flight, so the event queue is a binary heap of clients keyed by
 * (arrival time, send order); the send order makes equal arrival times (only possible with fixed delays)
 * deterministic: the request scheduled first is served first. Handling a request schedules the same
 * client's next one, so the heap's top is rewritten and sifted down in place.
 *
 * Draws per attempt, in order: the read request's hop (when the previous attempt ends, or at the start),
 * then at the read the reply's and the write request's hops, then at the write the reply's hop, and after
 * a conflict the next read request's hop followed by the backoff.
 */
export const run = ({ clients, delays, hop }: RunOptions): RunResult => {
  // the heap as parallel arrays: arrival time, send order and client of each in-flight request
  const at = new Float64Array(clients)
  const order = new Float64Array(clients)
  const owner = new Int32Array(clients)
  // per client: is the request in flight a write, and which version did the client read
  const writing = new Uint8Array(clients)
  const readVersion = new Float64Array(clients)
  let size = 0
  let sent = 0

  let version = 0
  let writes = 0
  let reads = 0
  let completionMs = 0

  /** Lets an arrival placed in the hole at `i` climb to its place (earlier time first, then send order). */
  const climb = (hole: number, time: number, seq: number, client: number) => {
    let i = hole
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (at[parent]! < time || (at[parent] === time && order[parent]! < seq)) break
      at[i] = at[parent]!
      order[i] = order[parent]!
      owner[i] = owner[parent]!
      i = parent
    }
    at[i] = time
    order[i] = seq
    owner[i] = client
  }

  // every client sends its first read at t = 0: insert the arrivals in send order
  for (let c = 0; c < clients; c++) climb(size++, hop(), sent++, c)

  while (size > 0) {
    const c = owner[0]!
    const t = at[0]!
    // the client's next request (or, when it is done, the heap's last one) replaces the top
    let time: number
    let seq: number
    let client = c
    if (writing[c] === 0) {
      // a read arrives: the reply carries the version, and the client writes it back on receipt
      reads++
      readVersion[c] = version
      writing[c] = 1
      const reply = hop()
      time = t + reply + hop()
      seq = sent++
    } else {
      writes++
      const reply = t + hop()
      if (readVersion[c] === version) {
        version++
        if (reply > completionMs) completionMs = reply
        size-- // this client is done
        if (size === 0) break
        time = at[size]!
        seq = order[size]!
        client = owner[size]!
      } else {
        // conflict: when the reply arrives, back off, then send the next read
        writing[c] = 0
        const request = hop()
        time = reply + request + delays.next(c)
        seq = sent++
      }
    }
    // Floyd's variant of sifting down: walk the hole at the top down to a leaf along the earlier
    // children, then let the new request climb back up. A client's next request usually lands behind
    // most others, so it climbs little, and the walk down costs one comparison per level instead of two.
    let i = 0
    for (;;) {
      let child = 2 * i + 1
      if (child >= size) break
      const right = child + 1
      if (right < size && (at[right]! < at[child]! || (at[right] === at[child] && order[right]! < order[child]!))) {
        child = right
      }
      at[i] = at[child]!
      order[i] = order[child]!
      owner[i] = owner[child]!
      i = child
    }
    climb(i, time, seq, client)
  }
  return { writes, reads, completionMs }
}
