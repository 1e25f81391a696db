/**
 * The attempt timeout: one attempt — sending, waiting for the headers, reading the body — has `timeout`, clipped
 * to the fiber's deadline. The body is read after `execute` returns, so the response handed on is one whose body
 * reads are bounded by the same instant: a body that stalls or trickles fails with a typed read timeout instead
 * of holding the caller until its deadline (or forever, without one).
 */
import type { HttpClient } from "@effect/platform"
import { HttpClientError, HttpClientResponse, HttpIncomingMessage } from "@effect/platform"
import type { Clock } from "effect"
import { Duration, Effect, FiberRef, Inspectable, Stream } from "effect"
import { globalValue } from "effect/GlobalValue"
import { AttemptTimeout, DeadlineExceeded, withDeadline } from "../../deadline.js"
import { timeoutWith } from "../../timeout.js"
import * as validate from "../../validate.js"
import { NoResponse } from "../httpErrors.js"
import { around, dualClient } from "./client.js"

/**
 * The instant (epoch millis of `Clock`) the current attempt ends at, set by `attemptTimeout` for what runs inside
 * it: the deadline header sends what is left of it.
 */
export const currentAttemptEnd: FiberRef.FiberRef<number | undefined> = globalValue(
  "effect-resilience/ResilientHttpClient/currentAttemptEnd",
  () => FiberRef.unsafeMake<number | undefined>(undefined)
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
        const attempt = Effect.map(execute(request), (response) => new BoundedResponse(response, end, own, clock))
        return Effect.locally(timeoutWith(attempt, end, clock, timedOut), currentAttemptEnd, end)
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
    readonly clock: Clock.Clock
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
      const left = this.until() - this.clock.unsafeCurrentTimeMillis()
      return Stream.interruptWhen(
        this.original.stream,
        Effect.zipRight(this.clock.sleep(Duration.millis(left)), Effect.fail(this.timedOut()))
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
    const now = this.clock.unsafeCurrentTimeMillis()
    return now < this.end ? this.end : now + this.attemptMillis
  }

  private bound<A>(read: Effect.Effect<A, HttpClientError.ResponseError>) {
    return Effect.suspend(() => timeoutWith(read, this.until(), this.clock, () => this.timedOut()))
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
