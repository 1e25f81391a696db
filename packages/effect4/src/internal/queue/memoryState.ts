import * as attribution from "@effect-resilience/core/crashAttribution"
import * as visibilityRules from "@effect-resilience/core/visibility"
import { Queue } from "effect"
import type { DeadLetter } from "../../DeadLetter.js"
import type { Message, ReleaseOptions } from "../../QueueSource.js"
import { MinHeap } from "../heap.js"
import { parseReceipt } from "./shared.js"

const READY = 0
const IN_FLIGHT = 1
const DELAYED = 2

export interface Entry<A> {
  readonly seq: number
  readonly id: string
  readonly key: string | undefined
  readonly body: A
  readonly enqueuedAt: number
  receiveCount: number
  /** How its current delivery stands, and whether a delivery of it was lost (core/crashAttribution.ts). */
  delivery: attribution.DeliveryState
  suspect: boolean
  /** Bumped on every claim and release: a receipt or timer of an older generation is stale. */
  generation: number
  state: number
  /** When the entry becomes visible again (while in flight or delayed); an extension pushes it out. */
  visibleAt: number
  lastReceivedAt: number
  lastError: string | undefined
}

const attributionOf = (entry: Entry<unknown>): attribution.Attribution => ({
  receiveCount: entry.receiveCount,
  state: entry.delivery,
  suspect: entry.suspect
})

interface Timer {
  readonly at: number
  readonly seq: number
  readonly generation: number
}

/**
 * The memory source's state: visible messages wait in an Effect `Queue` (by sequence number); invisible ones
 * (claimed, or released with a delay) sit in a timer heap and are moved back to the queue when `receive`
 * finds their time has come. Every claim and release bumps the entry's generation, so stale timers and
 * receipts are ignored; an extension keeps the generation (the receipt stays valid) and pushes a later timer,
 * which makes the earlier one stale by its instant.
 */
export class MemoryState<A> {
  private nextSeq = 0
  readonly entries = new Map<number, Entry<A>>()
  private readonly timers = new MinHeap<Timer>()
  readonly dlq = new Map<string, DeadLetter<A>>()

  constructor(private readonly ready: Queue.Queue<number>, private readonly visibility: number) {}

  enqueue(id: string, key: string | undefined, body: A, now: number): void {
    const entry: Entry<A> = {
      seq: ++this.nextSeq,
      id,
      key,
      body,
      enqueuedAt: now,
      receiveCount: 0,
      delivery: attribution.NOT_HELD,
      suspect: false,
      generation: 0,
      state: READY,
      visibleAt: now,
      lastReceivedAt: now,
      lastError: undefined
    }
    this.entries.set(entry.seq, entry)
    Queue.offerUnsafe(this.ready, entry.seq)
  }

  private hide(entry: Entry<A>, until: number, state: number): void {
    entry.generation++
    entry.state = state
    entry.visibleAt = until
    this.timers.push({ at: until, seq: entry.seq, generation: entry.generation })
  }

  private makeReady(entry: Entry<A>): void {
    entry.generation++
    entry.state = READY
    Queue.offerUnsafe(this.ready, entry.seq)
  }

  /** Moves the entries whose invisibility ended by `now` back to the ready queue. */
  promote(now: number): void {
    for (let top = this.timers.peek(); top !== undefined && top.at <= now; top = this.timers.peek()) {
      this.timers.pop()
      const entry = this.entries.get(top.seq)
      if (entry === undefined || entry.generation !== top.generation || entry.visibleAt > top.at) continue
      this.makeReady(entry)
    }
  }

  /**
   * Claims the entry `seq` if it is ready: one more receive (its previous delivery judged if it was lost),
   * invisible for the timeout.
   */
  claim(seq: number, now: number, runsSuspectsAlone: boolean): Message<A> | undefined {
    const entry = this.entries.get(seq)
    if (entry === undefined || entry.state !== READY) return undefined
    const claimed = attribution.claim(attributionOf(entry), runsSuspectsAlone)
    entry.receiveCount = claimed.receiveCount
    entry.delivery = claimed.state
    entry.suspect = claimed.suspect
    entry.lastReceivedAt = now
    this.hide(entry, visibilityRules.invisibleUntil(now, this.visibility), IN_FLIGHT)
    return {
      id: entry.id,
      key: entry.key,
      body: entry.body,
      receiveCount: entry.receiveCount,
      suspect: entry.suspect,
      enqueuedAt: entry.enqueuedAt,
      receivedAt: now,
      lastError: entry.lastError,
      receipt: `${entry.seq}:${entry.generation}`
    }
  }

  /**
   * The entry a receipt names, if the receipt is still current: the delivery is in flight and no one has
   * claimed the message since (its visibility may have run out, but while no one received it again, its
   * holder still owns it).
   */
  current(message: Message<A>): Entry<A> | undefined {
    const [seq, generation] = parseReceipt(message.receipt)
    const entry = this.entries.get(seq)
    return entry !== undefined && entry.generation === generation && entry.state === IN_FLIGHT ? entry : undefined
  }

  ack(message: Message<A>): boolean {
    const entry = this.current(message)
    return entry !== undefined && this.entries.delete(entry.seq)
  }

  extend(message: Message<A>, now: number): boolean {
    const entry = this.current(message)
    if (entry === undefined) return false
    entry.visibleAt = visibilityRules.extendedUntil(now, this.visibility)
    this.timers.push({ at: entry.visibleAt, seq: entry.seq, generation: entry.generation })
    return true
  }

  /** The holder runs the handler alone from now: extended as `extend` does, and a loss now is charged. */
  markAlone(message: Message<A>, now: number): boolean {
    if (!this.extend(message, now)) return false
    this.current(message)!.delivery = attribution.CHARGED
    return true
  }

  release(message: Message<A>, opts: ReleaseOptions | undefined, delay: number, now: number): boolean {
    const entry = this.current(message)
    if (entry === undefined) return false
    if (opts?.error !== undefined) entry.lastError = opts.error
    const released = attribution.release(attributionOf(entry), opts?.undoReceive === true)
    entry.receiveCount = released.receiveCount
    entry.delivery = released.state
    entry.suspect = released.suspect
    const visibleAt = visibilityRules.visibleAfterRelease(now, delay)
    if (visibleAt === undefined) this.makeReady(entry)
    else this.hide(entry, visibleAt, DELAYED)
    return true
  }

  deadLetter(message: Message<A>, reason: string, now: number): boolean {
    const entry = this.current(message)
    if (entry === undefined) return false
    this.entries.delete(entry.seq)
    this.dlq.delete(entry.id) // re-inserted last: the map keeps dead-lettering order
    this.dlq.set(entry.id, {
      id: entry.id,
      key: entry.key,
      body: entry.body,
      reason,
      receiveCount: entry.receiveCount,
      firstSeenAt: entry.enqueuedAt,
      lastSeenAt: entry.lastReceivedAt,
      deadLetteredAt: now
    })
    return true
  }
}
