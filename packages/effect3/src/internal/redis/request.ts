/**
 * One Redis call as an effect, with a real-time deadline: the hot path of every Redis backend (see
 * `client.ts`, which re-exports it).
 */
import { Effect } from "effect"

/** Why a call failed when Redis did not answer in time. */
export class RedisTimeout extends Error {
  constructor(readonly millis: number) {
    super(`Redis did not answer within ${millis} ms`)
    this.name = "RedisTimeout"
  }
}

/**
 * The deadlines of the calls in flight with one timeout, without a Node timer per call: calls wait in a
 * doubly-linked list in the order they started (so in order of their deadlines), and one interval timer
 * ticks `TICKS` times per timeout while any is waiting (it stops itself on a tick that finds none). A call
 * is stamped with the tick count when it starts and times out on the tick that makes it `TICKS + 1` ticks
 * old: between one and 1.25 timeouts after it started, never sooner. A settled call leaves the list at once,
 * so it dies young; an interrupted one stays until its deadline (nobody waits for its reply any more).
 *
 * A real timer on purpose: it bounds network I/O, which happens in real time, and must fire under
 * TestClock too (a test clock that never moves would turn a dead server into a hung test). It decides
 * nothing about the result.
 */
const TICKS = 4

abstract class Waiting {
  prev: Waiting | undefined = undefined
  next: Waiting | undefined = undefined
  stamp = 0
  /** Whether the call waits in its list (settled or timed-out calls do not). */
  listed = false
  abstract expire(): void
}

export class Deadlines {
  private head: Waiting | undefined = undefined
  private tail: Waiting | undefined = undefined
  private tick = 0
  private timer: ReturnType<typeof setInterval> | undefined = undefined
  private readonly period: number
  private readonly ticks: number

  constructor(readonly timeoutMillis: number) {
    this.period = Math.max(1, Math.ceil(timeoutMillis / TICKS))
    this.ticks = Math.ceil(timeoutMillis / this.period)
  }

  add(w: Waiting): void {
    w.stamp = this.tick
    w.listed = true
    w.prev = this.tail
    w.next = undefined
    if (this.tail === undefined) this.head = w
    else this.tail.next = w
    this.tail = w
    if (this.timer === undefined) {
      // eslint-disable-next-line no-restricted-globals
      this.timer = setInterval(() => this.onTick(), this.period)
      this.timer.unref()
    }
  }

  remove(w: Waiting): void {
    if (!w.listed) return
    w.listed = false
    if (w.prev === undefined) this.head = w.next
    else w.prev.next = w.next
    if (w.next === undefined) this.tail = w.prev
    else w.next.prev = w.prev
    w.prev = w.next = undefined
  }

  private onTick(): void {
    const now = ++this.tick
    if (this.head === undefined) {
      clearInterval(this.timer)
      this.timer = undefined
      this.tick = 0
      return
    }
    while (this.head !== undefined && now - this.head.stamp > this.ticks) {
      const w = this.head
      this.remove(w)
      w.expire()
    }
  }
}

const deadlines = new Map<number, Deadlines>()
/** The deadlines of the calls with this timeout (one list per timeout, made on first use and kept). */
export const deadlinesFor = (timeoutMillis: number): Deadlines => {
  let d = deadlines.get(timeoutMillis)
  if (d === undefined) deadlines.set(timeoutMillis, d = new Deadlines(timeoutMillis))
  return d
}

/**
 * One call in flight, as one object: how it is sent (`send`, and `retry` for a rejection), what its reply means
 * (`answer`), what an error ends as (`recover`), and its place among the deadlines. A backend's hot call is a
 * subclass holding its own arguments (`client.ts`'s `KeyScriptCall`), so a call costs this object, its two promise
 * callbacks and the register function of its wait; {@link requestOr} wraps closures in one for every other call.
 */
export abstract class Call<A, E> extends Waiting {
  private resume: ((effect: Effect.Effect<A, E>) => void) | undefined = undefined
  private settled = false
  private deadlines: Deadlines | undefined = undefined
  private readonly onReply = (reply: unknown): void => this.succeed(reply)
  private readonly onError = (error: unknown): void => this.fallback(error)

  /** Sends the call. */
  abstract send(): Promise<unknown>
  /** A second attempt after `send()` rejected with `error` (a promise for it), or `undefined` for none. */
  abstract retry(error: unknown): Promise<unknown> | undefined
  /** The reply as the effect the call ends with; a throw ends it as `recover(cause)`. */
  abstract answer(reply: unknown): Effect.Effect<A, E>
  /** What a rejection, a throw or no reply in time ends as: a failure, or a fallback answer. */
  abstract recover(cause: unknown): Effect.Effect<A, E>

  /**
   * Starts the call from the register function of `Effect.async`, with a real-time deadline of
   * `deadlines.timeoutMillis`: it settles once, by its reply, its error or its deadline (see `Deadlines`). Make
   * the object in the register function, so that every run of the effect is a call of its own.
   *
   * Hot path of every decision: no timer of its own, and no interruption handler (which would cost a mask and an
   * exit frame per call): an interrupted fiber ignores a late resume, and the command may still run on the
   * server, but nobody waits for it.
   */
  start(resume: (effect: Effect.Effect<A, E>) => void, deadlines: Deadlines): void {
    this.resume = resume
    this.deadlines = deadlines
    deadlines.add(this)
    try {
      this.send().then(this.onReply, this.onError)
    } catch (cause) {
      this.fail(cause)
    }
  }

  private fail(cause: unknown): void {
    if (this.settled) return
    this.settled = true
    this.deadlines!.remove(this)
    this.resume!(this.recover(cause))
  }

  private succeed(reply: unknown): void {
    if (this.settled) return
    let effect: Effect.Effect<A, E>
    try {
      effect = this.answer(reply)
    } catch (cause) {
      return this.fail(cause)
    }
    this.settled = true
    this.deadlines!.remove(this)
    this.resume!(effect)
  }

  private fallback(error: unknown): void {
    if (this.settled) return
    try {
      const again = this.retry(error)
      if (again === undefined) return this.fail(error)
      again.then(this.onReply, (cause) => this.fail(cause))
    } catch (cause) {
      this.fail(cause)
    }
  }

  expire(): void {
    if (this.settled) return
    this.settled = true
    this.resume!(this.recover(new RedisTimeout(this.deadlines!.timeoutMillis)))
  }
}

/** A call made of closures (see {@link requestOr}). */
class FnCall<A, E> extends Call<A, E> {
  constructor(
    readonly send: () => Promise<unknown>,
    private readonly retryWith: ((error: unknown) => Promise<unknown> | undefined) | undefined,
    private readonly decode: (reply: unknown) => A,
    readonly recover: (cause: unknown) => Effect.Effect<A, E>
  ) {
    super()
  }

  retry(error: unknown): Promise<unknown> | undefined {
    return this.retryWith?.(error)
  }

  answer(reply: unknown): Effect.Effect<A, E> {
    return Effect.succeed(this.decode(reply))
  }
}

/**
 * Sends one request as an effect: `send()`, and when it rejects with an error `retry` accepts (it returns a
 * promise for it), that second promise instead. The reply goes through `decode`; a rejection, a throw in
 * `send` or `decode`, or no reply within `timeoutMillis` ends as `recover(cause)` (an effect: a failure, or
 * a fallback answer). A blocking command (`XREADGROUP … BLOCK`, `BLPOP`) would need `timeoutMillis` to add
 * its block time, or every quiet wait would count as an outage; the library sends none (the stream queue
 * reads without `BLOCK`). See {@link Call.start}.
 */
export const requestOr = <A, E>(
  send: () => Promise<unknown>,
  retry: ((error: unknown) => Promise<unknown> | undefined) | undefined,
  timeoutMillis: number,
  decode: (reply: unknown) => A,
  recover: (cause: unknown) => Effect.Effect<A, E>
): Effect.Effect<A, E> =>
  Effect.async<A, E>((resume) => new FnCall(send, retry, decode, recover).start(resume, deadlinesFor(timeoutMillis)))

/** {@link requestOr} where every error fails the effect with `onError(cause)`. */
export const request = <A, E>(
  send: () => Promise<unknown>,
  retry: ((error: unknown) => Promise<unknown> | undefined) | undefined,
  timeoutMillis: number,
  decode: (reply: unknown) => A,
  onError: (cause: unknown) => E
): Effect.Effect<A, E> => requestOr(send, retry, timeoutMillis, decode, (cause) => Effect.fail(onError(cause)))
