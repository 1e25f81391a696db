/**
 * The attempt timeout: one attempt — sending, waiting for the headers, reading the body — has `timeout`, clipped
 * to the fiber's deadline. The body is read after `execute` returns, so the response handed on is one whose body
 * reads are bounded by the same instant: a body that stalls or trickles fails with a typed read timeout instead
 * of holding the caller until its deadline (or forever, without one).
 *
 * One timer serves the whole attempt: the exchange races it, and the response keeps it for its first body read
 * (which stops it), so a request arms one timer however its body is read.
 */
import type { HttpClient } from "@effect/platform"
import { HttpClientError, HttpClientResponse, HttpIncomingMessage } from "@effect/platform"
import type { Clock } from "effect"
import { Duration, Effect, Exit, Fiber, FiberId, FiberRef, Inspectable, Stream } from "effect"
import { globalValue } from "effect/GlobalValue"
import { monotonicMillis } from "../../clock.js"
import { AttemptTimeout, DeadlineExceeded, withDeadline } from "../../deadline.js"
import { forkDetached } from "../../fastPath.js"
import { firstOf, timeoutWith } from "../../timeout.js"
import * as validate from "../../validate.js"
import { NoResponse } from "../httpErrors.js"
import { around, dualClient } from "./client.js"

/**
 * The instant the current attempt ends at (of the monotonic reading of `Clock`, as deadlines are), set by
 * `attemptTimeout` for what runs inside it: the deadline header sends what is left of it.
 */
export const currentAttemptEnd: FiberRef.FiberRef<number | undefined> = globalValue(
  "effect-resilience/ResilientHttpClient/currentAttemptEnd",
  () => FiberRef.unsafeMake<number | undefined>(undefined)
)

type Timer = Fiber.RuntimeFiber<void>

/**
 * A timer that ends at `end`, started at once, in a fiber of its own (not the attempt's child): a response keeps
 * it after the fiber that made the attempt has ended.
 */
const arm = (clock: Clock.Clock, end: number): Effect.Effect<Timer> =>
  forkDetached(
    Effect.interruptible(
      Effect.suspend(() => clock.sleep(Duration.millis(Math.max(0, end - monotonicMillis(clock)))))
    )
  )

const stop = (timer: Timer): void => timer.unsafeInterruptAsFork(FiberId.none)

/** Runs `self` until `timer` ends, then interrupts it and fails with `onTimeout()`; the timer keeps running. */
const until = <A, E, R, E2>(self: Effect.Effect<A, E, R>, timer: Timer, onTimeout: () => E2) =>
  Effect.uninterruptibleMask((restore) =>
    Effect.flatMap(forkDetached(restore(self)), (child): Effect.Effect<A, E | E2> => {
      const done = child.unsafePoll()
      if (done !== null) return done
      return Effect.flatMap(
        Effect.onInterrupt(restore(firstOf(child, timer)), () => Fiber.interrupt(child)),
        (exit): Effect.Effect<A, E | E2> =>
          exit !== undefined ? exit : Effect.zipRight(Fiber.interrupt(child), Exit.fail(onTimeout()))
      )
    })
  )

const compile = (duration: Duration.DurationInput) => {
  const own = validate.millis("ResilientHttpClient attemptTimeout", duration)
  const timeout = Duration.millis(own)
  return <E, R>(self: HttpClient.HttpClient.With<E, R>) =>
    around(self, (request, execute) =>
      withDeadline((deadline, now, clock) => {
        const byDeadline = deadline !== undefined && now + own >= deadline
        const end = byDeadline ? deadline : now + own
        const timedOut = (): NoResponse | DeadlineExceeded =>
          byDeadline
            ? new DeadlineExceeded()
            : new NoResponse({ reason: "read-timeout", request, cause: new AttemptTimeout({ timeout }) })
        if (end <= now) return Effect.fail(timedOut())
        return Effect.flatMap(arm(clock, end), (timer) =>
          Effect.locally(until(execute(request), timer, timedOut), currentAttemptEnd, end).pipe(
            Effect.onExit((exit) =>
              Effect.sync(() => Exit.isFailure(exit) && stop(timer))
            ),
            Effect.map((response) => new BoundedResponse(response, end, own, clock, timer))
          ))
      }))
}

export const attemptTimeout = dualClient(compile)

/**
 * A response whose body reads end by the attempt's end. A read that starts after that instant — a caller that
 * read the body late, when it may long be in buffers — gets a whole attempt timeout of its own: never a hang,
 * and never a spurious failure of a body already there.
 */
class BoundedResponse implements HttpClientResponse.HttpClientResponse {
  readonly [HttpClientResponse.TypeId]: HttpClientResponse.TypeId = HttpClientResponse.TypeId
  readonly [HttpIncomingMessage.TypeId]: HttpIncomingMessage.TypeId = HttpIncomingMessage.TypeId

  constructor(
    readonly original: HttpClientResponse.HttpClientResponse,
    readonly end: number,
    readonly attemptMillis: number,
    readonly clock: Clock.Clock,
    /** The attempt's timer, for the first body read, which stops it; later reads arm their own. */
    private timer: Timer | undefined
  ) {}

  get request() {
    return this.original.request
  }
  get status() {
    return this.original.status
  }
  get headers() {
    return this.original.headers
  }
  get cookies() {
    return this.original.cookies
  }
  get remoteAddress() {
    return this.original.remoteAddress
  }
  get formData() {
    return this.bound(this.original.formData)
  }
  get text() {
    return this.bound(this.original.text)
  }
  get json() {
    return this.bound(this.original.json)
  }
  get urlParamsBody() {
    return this.bound(this.original.urlParamsBody)
  }
  get arrayBuffer() {
    return this.bound(this.original.arrayBuffer)
  }
  get stream() {
    return Stream.suspend(() => {
      const timer = this.take()
      const expiry = timer === undefined
        ? Effect.zipRight(
          this.clock.sleep(Duration.millis(this.until() - monotonicMillis(this.clock))),
          Effect.void
        )
        : Fiber.await(timer)
      return Stream.interruptWhen(this.original.stream, Effect.zipRight(expiry, Effect.fail(this.timedOut()))).pipe(
        Stream.ensuring(Effect.sync(() => timer !== undefined && stop(timer)))
      )
    })
  }

  toJSON() {
    return this.original.toJSON()
  }
  toString() {
    return this.original.toString()
  }
  [Inspectable.NodeInspectSymbol]() {
    return this.original[Inspectable.NodeInspectSymbol]()
  }

  private until(): number {
    const now = monotonicMillis(this.clock)
    return now < this.end ? this.end : now + this.attemptMillis
  }

  /** The attempt's timer, if no read has taken it yet and the attempt's time is not over. */
  private take(): Timer | undefined {
    const timer = this.timer
    this.timer = undefined
    return timer !== undefined && monotonicMillis(this.clock) < this.end ? timer : undefined
  }

  private bound<A>(read: Effect.Effect<A, HttpClientError.ResponseError>) {
    return Effect.suspend(() => {
      const timer = this.take()
      if (timer === undefined) return timeoutWith(read, this.until(), this.clock, () => this.timedOut())
      return Effect.ensuring(until(read, timer, () => this.timedOut()), Effect.sync(() => stop(timer)))
    })
  }

  private timedOut(): HttpClientError.ResponseError {
    const request = this.original.request
    return new HttpClientError.ResponseError({
      request,
      response: this,
      reason: "Decode",
      description: "the body did not arrive within the attempt timeout",
      cause: new NoResponse({
        reason: "read-timeout",
        request,
        cause: new AttemptTimeout({ timeout: Duration.millis(this.attemptMillis) })
      })
    })
  }
}
