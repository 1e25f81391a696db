/**
 * What one fleet breaker replica knows and holds between its calls to Redis: the fleet's state as the last
 * reply said it (and the state it shows for it, with the timer that half-opens an open view), the periods it
 * has seen, the counts it has not sent yet, the flushes messages may still prompt, and whether it was refused
 * a permit in this period.
 */
import * as Fleet from "@effect-resilience/core/breakerFleet"
import type * as Protocol from "@effect-resilience/core/breakerFleetProtocol"
import type { Fallback } from "./fleetFallback.js"
import { delayAt } from "./policy.js"
import type { Failure, Shell } from "./shell.js"

/**
 * Flushes that messages may prompt in a burst (then one per flushInterval): enough for the transitions that
 * follow each other closely (half-open, then the trial's verdict), not for a flood to make a replica loop.
 */
const PROMPT_BURST = 3

/** A script reply, numbered by the call that got it: a reply to an earlier call than the last applied is late. */
export interface Reply extends Protocol.Reply {
  readonly seq: number
}

export class ReplicaState {
  view: Fleet.View = Fleet.unknown
  /** Periods this replica has seen: a closed call counts only in the one it was admitted in. */
  generation = 0
  readonly deltas = Fleet.makeDeltas()
  disposed = false
  /**
   * The failure that opened the fleet breaker, when this replica's own call did (CircuitOpen's lastFailure):
   * what it knows; another replica's failures it never sees.
   */
  lastFailure: Failure | undefined
  // the last failure this replica counted or reported in the current period
  private hasRecent = false
  private recentError: unknown
  // script calls sent, and the number of the one whose reply the view is
  private sent = 0
  private applied = 0
  private armed = false
  private prompts = Fleet.prompts(PROMPT_BURST)
  // the period in which this replica was refused a permit (every permit taken), and until when to believe it
  private deniedGeneration = -1
  private deniedUntil = 0
  // the delays computed, by opening number: they change only when the openings do
  private readonly delays = new Map<number, number>()

  constructor(
    private readonly shell: Shell,
    private readonly fallback: Fallback,
    private readonly flushIntervalMillis: number
  ) {}

  /** The number of the next script call. */
  nextSeq(): number {
    return ++this.sent
  }

  private readonly onTimer = () => {
    this.armed = false
    this.sync(this.shell.now())
  }

  /** Shows the fleet view's state at `at` (not while on the local fallback), arming the timer of an open view. */
  sync(at: number): void {
    if (this.fallback.local !== undefined) return
    const state = Fleet.stateAt(this.view, at)
    this.shell.show(state, at)
    if (state === "open" && !this.view.isolated && !this.armed && !this.disposed) {
      this.armed = true
      this.shell.arm(Math.max(0, this.view.openUntil - at), this.onTimer)
    }
  }

  stopTimer(): void {
    this.shell.cancelTimer()
    this.armed = false
  }

  /**
   * Takes the fleet state a script replied: Redis's state is the truth, whatever this replica believed
   * (an epoch going backwards included: Redis restored from an older snapshot). Only the reply to a call
   * sent before the one the view came from is dropped.
   */
  apply(reply: Reply, opener: Failure | undefined): void {
    if (reply.seq < this.applied) return
    this.applied = reply.seq
    const next = reply.view
    if (Fleet.sameView(this.view, next)) return
    if (!Fleet.samePeriod(this.view, next)) {
      // the counts and refusals of the period that ended say nothing about the new one
      this.newPeriod()
      // a half-open period follows the opening before it: what opened that still stands
      if (next.state !== "half-open") this.lastFailure = undefined
    }
    if (reply.opened) this.lastFailure = opener
    if (next.isolated) this.lastFailure = undefined
    this.stopTimer()
    this.view = next
    this.sync(this.shell.now())
  }

  /** Takes the fleet's state after the local fallback (whatever it learned meanwhile): a new period. */
  rejoin(reply: Reply): void {
    this.applied = Math.max(this.applied, reply.seq)
    this.view = reply.view
    this.lastFailure = undefined
    this.newPeriod()
  }

  private newPeriod(): void {
    Fleet.clear(this.deltas)
    this.generation++
    this.hasRecent = false
  }

  /** A call of the current period failed with `error`: if what this replica sends next opens the fleet, why. */
  noteFailure(error: unknown): void {
    this.hasRecent = true
    this.recentError = error
  }

  /** The last failure noted in the current period, for the call about to be sent. */
  recentFailure(): Failure | undefined {
    return this.hasRecent ? { error: this.recentError } : undefined
  }

  /**
   * Whether a message on the channel should make the replica flush now: never believed (anyone allowed to
   * publish there can send one), one that may be news (not the view it has) asks Redis — within the prompts
   * left, and not when a flush is already due.
   */
  prompted(message: string, flushDue: boolean): boolean {
    if (this.disposed || flushDue || !Fleet.isNews(this.view, message)) return false
    const p = Fleet.prompt(this.prompts, this.shell.now(), this.flushIntervalMillis, PROMPT_BURST)
    this.prompts = p.prompts
    return p.allowed
  }

  /** Refused a permit at `now`: refuse without asking Redis again until the next flush. */
  denied(now: number): void {
    this.deniedGeneration = this.generation
    this.deniedUntil = now + this.flushIntervalMillis
  }

  /** Whether every permit of this period is taken, as far as this replica knows at `at`. */
  isDenied(at: number): boolean {
    return this.deniedGeneration === this.generation && at < this.deniedUntil
  }

  /** How long a refused caller should wait at `at`. */
  retryAfterMillis(at: number, view = this.view): number {
    return Fleet.retryAfterMillis(view, at, this.flushIntervalMillis)
  }

  /** The `openFor` delay of the fleet's opening number `n` (its schedule stepped `n` times from the start). */
  delayOf(n: number, at: number): number {
    const { config } = this.shell
    if (config.schedule === undefined) return config.openForMillis
    const known = this.delays.get(n)
    if (known !== undefined) return known
    if (this.delays.size >= 8) this.delays.clear()
    const delay = delayAt(this.shell.env.context, config, n, at)
    this.delays.set(n, delay)
    return delay
  }
}
