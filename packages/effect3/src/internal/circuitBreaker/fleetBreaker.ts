/**
 * One replica's fleet breaker: its calls to Redis (flush, permit, report, isolate, reset), what their replies do
 * to what it knows (`fleetState.ts`) and to its callers, and the switch to its local fallback
 * (`fleetFallback.ts`) when Redis fails. `redis.ts` builds it.
 */
import type * as Machine from "@effect-resilience/core/breaker"
import * as Fleet from "@effect-resilience/core/breakerFleet"
import * as Protocol from "@effect-resilience/core/breakerFleetProtocol"
import * as Window from "@effect-resilience/core/breakerWindow"
import { type Cause, Effect, Runtime } from "effect"
import type { Snapshot, State } from "../../CircuitBreaker.js"
import * as redis from "../redis/client.js"
import type { CircuitOpen } from "./errors.js"
import type { FleetConfig } from "./fleetConfig.js"
import { Fallback, type Outages } from "./fleetFallback.js"
import { ReplicaState, type Reply } from "./fleetState.js"
import type { Config } from "./policy.js"
import { fleetScript } from "./redisScript.js"
import type * as Shell from "./shell.js"
import type * as Subscriber from "./subscriber.js"

const decode = (reply: unknown, seq: number): Reply => {
  const decoded = Protocol.decodeReply(reply)
  if (decoded === undefined) throw new Error(`unexpected script reply: ${String(reply)}`)
  return { ...decoded, seq }
}

/** What a replica's breaker runs on: shared by the breakers of a keyed registry. */
export interface Resources {
  readonly client: redis.Client
  readonly channels: Subscriber.Channels
  readonly outages: Outages
}

/** The Redis names of one fleet breaker, as this replica's client reaches them. */
export interface Names {
  readonly scriptKeys: ReadonlyArray<string>
  readonly channel: string
}

/** One replica's fleet breaker: its calls to Redis, and what they do to its state and its callers. */
export class FleetBreaker {
  readonly replica: ReplicaState
  readonly fallback: Fallback
  // the scope is closing: a Redis failure now (the last flush) must not start a local breaker
  private closing = false
  private flushing = false
  // a flush was asked for while one ran: run again as soon as it ends
  private flushAgain = false
  // a call used the breaker since the last periodic flush
  private used = false

  constructor(
    private readonly shell: Shell.Shell,
    private readonly fleet: FleetConfig,
    private readonly client: redis.Client,
    private readonly names: Names,
    private readonly token: string,
    outages: Outages,
    annotations: Record<string, unknown>
  ) {
    this.fallback = new Fallback(shell, outages, annotations)
    this.replica = new ReplicaState(shell, this.fallback, fleet.flushIntervalMillis)
  }

  private get config(): Config {
    return this.shell.config
  }

  /** A message on the channel: a prompt to flush, never believed (see `ReplicaState.prompted`). */
  readonly onMessage = (message: string): void => {
    if (this.replica.prompted(message, this.flushAgain)) this.kick()
  }

  /** One script call for the period `period` names (its epoch, incarnation and start). */
  private run(
    op: Protocol.Op,
    at: number,
    period: Fleet.View,
    asked: number,
    deltas: Fleet.Deltas
  ): Effect.Effect<Reply, unknown> {
    return Effect.suspend(() => {
      const seq = this.replica.nextSeq()
      const { config } = this
      const call: Protocol.Call = {
        op,
        now: at,
        epoch: period.epoch,
        inc: period.inc,
        since: period.changedAt,
        token: this.token,
        delay: this.replica.delayOf(this.replica.view.openings + 1, at),
        asked,
        // the current half-open period's timeout: the option, or the delay of the opening before it
        trialTimeout: config.halfOpenTimeoutMillis ?? this.replica.delayOf(this.replica.view.openings, at),
        permits: config.permits,
        failureRate: config.halfOpenFailureRate,
        leaseMillis: this.fleet.trialLeaseMillis,
        trip: config.trip,
        deltas
      }
      return redis.runScript(
        this.client,
        fleetScript,
        this.names.scriptKeys,
        Protocol.encode(call, this.names.channel),
        false,
        this.fleet.timeoutMillis,
        (reply) => decode(reply, seq),
        (cause) => cause
      )
    })
  }

  /** Switches to a local breaker seeded with the last known fleet state (never while closing). */
  private fallBack(cause: unknown): Effect.Effect<void> {
    return Effect.suspend(() => {
      if (this.fallback.local !== undefined || this.replica.disposed || this.closing) return Effect.void
      this.replica.stopTimer()
      Fleet.clear(this.replica.deltas)
      return this.fallback.enter(this.replica.view, this.shell.now(), cause, this.replica.lastFailure)
    })
  }

  /** Takes the fleet's state again, whatever the local breaker learned meanwhile. */
  private rejoin(reply: Reply): Effect.Effect<void> {
    return Effect.suspend(() => {
      this.replica.rejoin(reply)
      const logged = this.fallback.leave()
      this.replica.sync(this.shell.now())
      return logged
    })
  }

  readonly flush: Effect.Effect<void> = Effect.suspend(() => {
    if (this.replica.disposed) return Effect.void
    if (this.flushing) {
      this.flushAgain = true
      return Effect.void
    }
    this.flushing = true
    this.flushAgain = false
    const period = this.replica.view
    const asked = this.replica.deltas.asked
    const opener = this.replica.recentFailure()
    const deltas = this.fallback.local === undefined ? Fleet.take(this.replica.deltas) : Fleet.noDeltas
    return this.run("flush", this.shell.now(), period, asked, deltas).pipe(
      Effect.matchEffect({
        onFailure: (cause) => this.fallBack(cause),
        onSuccess: (reply) => {
          if (this.replica.disposed) return Effect.void
          if (this.fallback.local !== undefined) return this.rejoin(reply)
          this.replica.apply(reply, opener)
          return Effect.void
        }
      }),
      Effect.ensuring(Effect.sync(() => {
        this.flushing = false
        // a flush asked for while this one ran (its interval came, or flushEvery calls) starts now, not a
        // whole interval later
        if (this.flushAgain && !this.closing) this.kick()
      }))
    )
  })

  /** The periodic flush: every `flushInterval`, unless idle and `skipIdle` (in fleet mode: a fallback rejoins). */
  readonly tick: Effect.Effect<void> = Effect.suspend(() => {
    const idle = !this.used && this.replica.deltas.calls === 0 && this.fallback.local === undefined
    this.used = false
    return idle && this.fleet.skipIdle ? Effect.void : this.flush
  })

  private kick(): void {
    if (this.flushing) this.flushAgain = true
    else if (!this.replica.disposed) Runtime.runFork(this.shell.env.runtime, this.flush)
  }

  /** Counts a closed call admitted in period `gen` (a call from an earlier period does not count). */
  private readonly recordClosed = (gen: number, outcome: Machine.Outcome, startedAt: number): boolean => {
    if (outcome === "ignored" || gen !== this.replica.generation || this.fallback.local !== undefined) return false
    const { slowMillis } = this.config
    const slow = slowMillis !== undefined && this.shell.now() - startedAt > slowMillis
    const failed = outcome === "failure"
    if (failed) this.replica.noteFailure(this.shell.classifier.failure)
    const counted = Fleet.record(this.replica.deltas, failed, slow, this.shell.classifier.asked)
    if (counted >= this.fleet.flushEvery) this.kick()
    return false
  }

  private runClosed<A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> {
    return this.shell.runClosed(self, this.replica.generation, this.recordClosed)
  }

  private refuse(at: number): Effect.Effect<never, CircuitOpen> {
    return this.shell.reject(this.replica.retryAfterMillis(at), this.replica.lastFailure)
  }

  /** Reports a trial's end; a Redis failure switches to the local breaker (the call's result stands). */
  private report(period: Fleet.View, outcome: Machine.Outcome, startedAt: number): Effect.Effect<void> {
    // read from this trial's failure, now: the classifier's next call overwrites it
    const asked = outcome === "failure" ? this.shell.classifier.asked : 0
    if (outcome === "failure" && Fleet.samePeriod(period, this.replica.view)) {
      this.replica.noteFailure(this.shell.classifier.failure)
    }
    const opener = this.replica.recentFailure()
    return Effect.suspend(() => {
      const at = this.shell.now()
      const { slowMillis } = this.config
      const slow = slowMillis !== undefined && at - startedAt > slowMillis
      const op = outcome === "ignored" ? "release" : outcome === "failure" || slow ? "failure" : "success"
      return this.run(op, at, period, asked, Fleet.noDeltas).pipe(
        Effect.matchEffect({
          onFailure: (cause) => this.fallBack(cause),
          onSuccess: (reply) => Effect.sync(() => this.replica.apply(reply, opener))
        })
      )
    })
  }

  /** Half-open: take a permit in Redis, run as a trial, report the outcome. */
  private trial<A, E, R>(self: Effect.Effect<A, E, R>, at: number): Effect.Effect<A, E | CircuitOpen, R> {
    return Effect.uninterruptibleMask((restore) =>
      this.run("acquire", at, this.replica.view, 0, Fleet.noDeltas).pipe(
        Effect.matchEffect({
          onFailure: (cause) =>
            Effect.zipRight(
              this.fallBack(cause),
              Effect.suspend(() => {
                const local = this.fallback.local
                return local === undefined ? restore(self) : restore(local.protect(self))
              })
            ),
          onSuccess: (reply): Effect.Effect<A, E | CircuitOpen, R> => {
            this.replica.apply(reply, undefined)
            if (!reply.granted) {
              const now = this.shell.now()
              // another replica's trial closed it meanwhile (or Redis says closed): a closed call after all
              if (this.fallback.local === undefined && Fleet.stateAt(this.replica.view, now) === "closed") {
                return restore(this.runClosed(self))
              }
              // every permit is taken: refuse without asking Redis again until the next flush
              this.replica.denied(now)
              return this.shell.reject(this.replica.retryAfterMillis(now, reply.view), this.replica.lastFailure)
            }
            const period = reply.view
            const startedAt = this.shell.now()
            return Effect.matchCauseEffect(restore(self), {
              onSuccess: (a: A) => Effect.as(this.report(period, "success", startedAt), a),
              onFailure: (cause: Cause.Cause<E>) =>
                Effect.zipRight(
                  this.report(period, this.shell.classifier.classify(cause), startedAt),
                  Effect.failCause(cause)
                )
            })
          }
        })
      )
    )
  }

  private guarded<A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E | CircuitOpen, R> {
    const local = this.fallback.local
    if (local !== undefined) return local.protect(self)
    const at = this.shell.now()
    this.replica.sync(at)
    const state = Fleet.stateAt(this.replica.view, at)
    if (state === "closed") return this.runClosed(self)
    if (state === "open") return this.refuse(at)
    // half-open: every permit of this period is taken (as far as this replica knows)
    if (this.replica.isDenied(at)) return this.refuse(at)
    return this.trial(self, at)
  }

  // the hot path: closed in fleet mode runs the call with the period's shared handlers
  readonly protect = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E | CircuitOpen, R> =>
    Effect.suspend(() => {
      this.used = true
      return this.shell.shown() === "closed" && this.fallback.local === undefined
        ? this.runClosed(self)
        : this.guarded(self)
    })

  control(op: "isolate" | "reset"): Effect.Effect<void> {
    return Effect.suspend(() => {
      const local = this.fallback.local
      if (local !== undefined) return Effect.sync(() => local[op]())
      return this.run(op, this.shell.now(), this.replica.view, 0, Fleet.noDeltas).pipe(
        Effect.matchEffect({
          onFailure: (cause) => Effect.zipRight(this.fallBack(cause), Effect.sync(() => this.fallback.local?.[op]())),
          onSuccess: (reply) => Effect.sync(() => this.replica.apply(reply, undefined))
        })
      )
    })
  }

  state(): State {
    const local = this.fallback.local
    if (local !== undefined) return local.state()
    const at = this.shell.now()
    this.replica.sync(at)
    return Fleet.stateAt(this.replica.view, at)
  }

  snapshot(): Snapshot {
    const local = this.fallback.local
    if (local !== undefined) return local.snapshot()
    return {
      ...Fleet.saved(this.replica.view, this.shell.now()),
      window: Window.snapshot(Window.make(this.config.trip))
    }
  }

  /** The scope is closing: flush what is left (best effort, within `timeout`), then stop. */
  readonly close: Effect.Effect<void> = Effect.suspend(() => {
    this.closing = true
    const last = this.fallback.local === undefined && this.replica.deltas.calls > 0 && !this.flushing
      ? Effect.ignore(this.flush)
      : Effect.void
    return Effect.zipRight(
      last,
      Effect.sync(() => {
        this.replica.disposed = true
        this.replica.stopTimer()
        this.fallback.dispose()
      })
    )
  })
}
