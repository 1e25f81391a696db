/**
 * A breaker whose state lives in this process, on a {@link Shell}: the decisions are `core/breaker.ts` (the
 * state machine) and `core/breakerWindow.ts` (the trip policy's counters); this steps the `openFor` schedule,
 * arms the timer that half-opens the breaker and ends a half-open period at its `halfOpenTimeout`, and turns
 * the machine's moves into the shell's transitions.
 *
 * The machine is held in a field, replaced synchronously: a decision (refresh, take a permit) happens inside
 * one synchronous step, so no other fiber can interleave, and the closed path costs no effect of its own (a
 * `Ref` would add one per call). The fleet breaker runs one of these on its own shell while Redis fails.
 */
import * as Machine from "@effect-resilience/core/breaker"
import * as Window from "@effect-resilience/core/breakerWindow"
import type { Effect as Eff } from "effect"
import { Effect } from "effect"
import type { Snapshot, State } from "../../CircuitBreaker.js"
import type { CircuitOpen } from "./errors.js"
import { delayAt, stepSync } from "./policy.js"
import type { Failure, Shell } from "./shell.js"

export class Local {
  private m: Machine.Machine = Machine.initial
  private readonly window: Window.Window
  // whether a closed call's outcome needs the time: time windows and slow-call rules
  private readonly timedClosed: boolean
  private scheduleState: unknown
  private replay = 0 // schedule steps owed after restoring `openings` from a snapshot
  private lastDelay: number
  private disposed = false
  // the last failure counted in the current period (a closed call's, or a failed trial's), and the longest
  // openForAtLeast the period's failed trials asked for: what an opening at the period's end is told
  private hasRecent = false
  private recentError: unknown
  private sampleAsked = 0
  /** The failure that opened the breaker last (CircuitOpen's lastFailure), until it closes or is isolated. */
  private lastFailure: Failure | undefined

  /** `opened`: the failure that opened the `initial` state, when the caller knows it (a fleet replica's). */
  constructor(private readonly shell: Shell, initial: Snapshot | undefined, opened?: Failure) {
    const { config, now } = shell
    this.window = Window.make(config.trip)
    this.timedClosed = Window.timed(this.window) || config.slowMillis !== undefined
    this.scheduleState = config.schedule?.initial
    this.lastDelay = config.openForMillis
    if (initial !== undefined) {
      Window.restore(this.window, (initial as { readonly window?: unknown }).window)
      const timeout = config.halfOpenTimeoutMillis ?? delayAt(shell.env.runtime, config, initial.openings, now())
      this.set(Machine.restore(initial, timeout), now())
      this.replay = initial.openings
      if (this.m.state === "open" && !this.m.isolated) this.arm(Math.max(0, this.m.openUntil - now()))
      if (!this.m.isolated && this.m.state !== "closed") this.lastFailure = opened
    }
  }

  /** Takes the machine's next value; a new generation is a new period (a transition, when the state changed). */
  private set(next: Machine.Machine, at: number): void {
    if (next.generation !== this.m.generation) {
      this.hasRecent = false
      this.sampleAsked = 0
    }
    this.m = next
    this.shell.show(next.state, at)
  }

  private readonly onTimer = () => {
    if (!this.disposed) this.refresh(this.shell.now())
  }

  private arm(delay: number): void {
    if (!this.disposed) this.shell.arm(delay, this.onTimer)
  }

  /**
   * Brings the machine to `at`: an open breaker whose time is up half-opens; a half-open period whose
   * trials have not all ended by its deadline opens again, as of that deadline.
   */
  private refresh(at: number): void {
    this.set(Machine.refresh(this.m, at), at)
    const deadline = Machine.expiredAt(this.m, at)
    if (deadline === undefined) return
    // no failure opened it: its trials hung
    this.hasRecent = false
    this.open(deadline, 0)
    this.set(Machine.refresh(this.m, at), at)
  }

  // a schedule that ends (or, against its probe at construction, fails) keeps the last delay
  private step(at: number, openings: number): void {
    const r = stepSync(this.shell.env.runtime, this.shell.config.schedule!, at, openings, this.scheduleState)
    if (r._tag === "Delay") {
      this.scheduleState = r.state
      this.lastDelay = r.millis
    }
  }

  /**
   * Opens for openFor's next delay, or for `asked` (the failure that opened it asked for that) when longer;
   * the half-open period after it waits `halfOpenTimeout` for its trials, by default that openFor delay. The
   * last failure counted in the period that ends is the one that opened it.
   */
  private open(at: number, asked: number): void {
    const { config } = this.shell
    this.lastFailure = this.hasRecent ? { error: this.recentError } : undefined
    if (config.schedule !== undefined) {
      const openings = this.m.openings + 1
      for (; this.replay > 0; this.replay--) this.step(at, openings)
      this.step(at, openings)
    }
    Window.reset(this.window)
    const delay = Math.max(this.lastDelay, asked)
    this.set(Machine.open(this.m, at, delay, config.halfOpenTimeoutMillis ?? this.lastDelay), at)
    this.arm(Math.max(0, this.m.openUntil - this.shell.now()))
  }

  private close(at: number, next: Machine.Machine): void {
    this.shell.cancelTimer()
    this.lastFailure = undefined
    this.replay = 0
    this.scheduleState = this.shell.config.schedule?.initial
    Window.reset(this.window)
    this.set(next, at)
  }

  /**
   * Records a call admitted while closed in generation `gen`; true when it changed the state. A call
   * admitted in an earlier period (before an opening, or a reset) that finishes later says nothing about
   * now, even if the breaker has closed again since.
   */
  private readonly recordClosed = (gen: number, outcome: Machine.Outcome, startedAt: number): boolean => {
    if (this.disposed || !Machine.closedCounts(this.m, gen, outcome)) return false
    const { config, now } = this.shell
    const at = this.timedClosed ? now() : 0
    const slow = config.slowMillis !== undefined && at - startedAt > config.slowMillis
    const failed = outcome === "failure"
    if (failed) this.noteFailure()
    if (!Window.record(this.window, failed, slow, at)) return false
    this.open(this.timedClosed ? at : now(), failed ? this.shell.classifier.asked : 0)
    return true
  }

  /** The call just classified failed, and counts in the current period. */
  private noteFailure(): void {
    this.hasRecent = true
    this.recentError = this.shell.classifier.failure
  }

  /** Records a half-open trial; true when it changed the state (a trial past its deadline never does). */
  private recordTrial(gen: number, outcome: Machine.Outcome, startedAt: number): boolean {
    if (this.disposed) return false
    const { config, now } = this.shell
    const at = now()
    this.refresh(at)
    const slow = config.slowMillis !== undefined && at - startedAt > config.slowMillis
    const failedBefore = this.m.failed
    const end = Machine.trialEnded(this.m, gen, outcome, slow, config.permits, config.halfOpenFailureRate)
    this.m = end.machine
    // a failed trial of this period is in its sample: the opening it leads to is told of it
    if (end.machine.failed > failedBefore && outcome === "failure") {
      this.noteFailure()
      this.sampleAsked = Math.max(this.sampleAsked, this.shell.classifier.asked)
    }
    if (end.verdict === "none") return false
    if (end.verdict === "open") this.open(at, this.sampleAsked)
    else this.close(at, Machine.close(this.m))
    return true
  }

  // Not closed: decide and take a permit in one synchronous step, uninterruptibly, so an interrupted
  // trial always reaches `recordTrial` and gives its permit back.
  private guarded<A, E, R>(self: Eff.Effect<A, E, R>): Eff.Effect<A, E | CircuitOpen, R> {
    return Effect.uninterruptibleMask((restore) =>
      Effect.suspend((): Eff.Effect<A, E | CircuitOpen, R> => {
        const at = this.shell.now()
        this.refresh(at)
        // a trial admitted while none of its period runs starts the period's clock
        const starts = Machine.running(this.m) === 0
        const { admission, machine } = Machine.admit(this.m, at, this.shell.config.permits)
        this.set(machine, at)
        switch (admission._tag) {
          case "Closed":
            return restore(this.shell.runClosed(self, admission.generation, this.recordClosed))
          case "Rejected":
            return this.shell.reject(admission.retryAfterMillis, this.lastFailure)
          case "Trial": {
            const gen = admission.generation
            // at the deadline, trials still running reopen it
            if (starts) this.arm(this.m.halfOpenUntil - at)
            return this.shell.observe(restore(self), (outcome) => this.recordTrial(gen, outcome, at))
          }
        }
      })
    )
  }

  readonly protect = <A, E, R>(self: Eff.Effect<A, E, R>): Eff.Effect<A, E | CircuitOpen, R> =>
    Effect.suspend(() =>
      this.m.state === "closed" ? this.shell.runClosed(self, this.m.generation, this.recordClosed) : this.guarded(self)
    )

  state(): State {
    this.refresh(this.shell.now())
    return this.m.state
  }

  isolate(): void {
    this.shell.cancelTimer()
    this.lastFailure = undefined
    const next = Machine.isolate(this.m)
    if (next.generation !== this.m.generation) Window.reset(this.window)
    this.set(next, this.shell.now())
  }

  /** A new closed period even when already closed: calls admitted before the reset no longer count. */
  reset(): void {
    this.shell.cancelTimer()
    this.close(this.shell.now(), Machine.reset(this.m))
  }

  snapshot(): Snapshot {
    this.refresh(this.shell.now())
    return { ...Machine.save(this.m), window: Window.snapshot(this.window) }
  }

  /** No longer used (the fleet breaker rejoined): its timer and late outcomes do nothing. */
  dispose(): void {
    this.disposed = true
    this.shell.cancelTimer()
  }
}
