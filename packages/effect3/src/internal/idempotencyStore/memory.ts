/**
 * The memory idempotency store: a map of records, the claim decisions of `core/idempotency.ts`, and
 * expiry from a binary heap. The decisions are the SQL and Redis stores' too. Leases and TTLs live in this
 * process only: they are measured on the monotonic reading of the fiber's `Clock` (`internal/clock.ts`), which a
 * step of the wall clock does not move.
 */
import * as core from "@effect-resilience/core/idempotency"
import { Duration, Effect, Exit, Layer } from "effect"
import type {
  ClaimRef,
  ClaimRequest,
  ClaimResult,
  MemoryOptions,
  Store,
  StoredResponse
} from "../../IdempotencyStore.js"
import { monotonicMillisOf as nowOf } from "../clock.js"
import { MinHeap } from "../heap.js"
import * as validate from "../validate.js"
import { IdempotencyStore, IdempotencyStoreFull } from "./service.js"

interface Record {
  /** the claim's scope, counted against its `maxRecordsPerScope` */
  readonly scope: string
  readonly fingerprint: string
  token: string
  /** in progress until `response` is set */
  response: StoredResponse | undefined
  completed: boolean
  leaseUntil: number
  expiresAt: number
  /** a store-wide sequence number, new on every write, so stale heap entries are recognised */
  version: number
}

interface Expiry {
  readonly at: number
  readonly scope: string
  readonly key: string
  readonly version: number
}

/** Expired records removed per call at most: keeps every call O(log n) while still draining backlogs. */
const EVICT_PER_CALL = 16

export const makeMemory = (options: MemoryOptions = {}) => {
  const maxRecords = validate.positiveInt("IdempotencyStore memory maxRecords", options.maxRecords ?? 10_000, {
    allowInfinity: true
  })
  const maxRecordsPerScope = validate.positiveInt(
    "IdempotencyStore memory maxRecordsPerScope",
    options.maxRecordsPerScope ?? core.defaultMaxRecordsPerScope(maxRecords),
    { allowInfinity: true }
  )
  return Effect.sync(() => build(maxRecords, maxRecordsPerScope))
}

/**
 * The records, by scope then key, and their bookkeeping: the live count and the expiry heap. Every change of a
 * record's presence or end goes through here, so the count and the heap never disagree with the records. A
 * scope's map holds its records (its size is the scope's count); the scope string, a digest the middleware
 * keeps, is looked up with its hash cached, and the key alone is hashed per call (no identity string is built).
 */
class Records {
  private readonly byScope = new Map<string, Map<string, Record>>()
  /** live records in all scopes */
  size = 0
  private expiries = new MinHeap<Expiry>()
  // one sequence for the whole store: a replacement record must never match a heap entry of the record
  // it replaced (a per-record counter would start again and let old entries evict the new record early)
  private writes = 0

  constructor(readonly maxRecords: number, readonly maxRecordsPerScope: number) {}

  get pendingExpiries(): number {
    return this.expiries.size
  }

  get(scope: string, key: string): Record | undefined {
    return this.byScope.get(scope)?.get(key)
  }

  schedule(key: string, record: Record): void {
    record.version = ++this.writes
    this.expiries.push({ at: core.endOf(record), scope: record.scope, key, version: record.version })
    // Released records leave their entries behind until those come due (a TTL away): when stale entries
    // outnumber live records, rebuild from the records, so the heap stays O(records), amortised O(1) a write.
    if (this.expiries.size > 2 * this.size + 1_024) {
      this.expiries = new MinHeap<Expiry>()
      for (const [scope, records] of this.byScope) {
        for (const [k, live] of records) {
          this.expiries.push({ at: core.endOf(live), scope, key: k, version: live.version })
        }
      }
    }
  }

  add(key: string, record: Record): void {
    let records = this.byScope.get(record.scope)
    if (records === undefined) this.byScope.set(record.scope, records = new Map())
    if (!records.has(key)) this.size++
    records.set(key, record)
  }

  remove(key: string, record: Record): void {
    const records = this.byScope.get(record.scope)
    if (records === undefined || !records.delete(key)) return
    this.size--
    if (records.size === 0) this.byScope.delete(record.scope)
  }

  evict(now: number, limit = EVICT_PER_CALL): void {
    for (let i = 0; i < limit; i++) {
      const next = this.expiries.peek()
      if (next === undefined || next.at > now) return
      this.expiries.pop()
      const record = this.get(next.scope, next.key)
      if (record !== undefined && record.version === next.version) this.remove(next.key, record)
    }
  }

  private roomFor(scope: string, key: string) {
    const records = this.byScope.get(scope)
    return records?.has(key) === true
      ? "Room"
      : core.room(this.size, this.maxRecords, records?.size ?? 0, this.maxRecordsPerScope)
  }

  /** A new key's room: made from expired records only, never from live claims or stored responses. */
  refusal(scope: string, key: string, now: number): IdempotencyStoreFull | undefined {
    if (this.roomFor(scope, key) === "Room") return undefined
    this.evict(now, Infinity)
    switch (this.roomFor(scope, key)) {
      case "Room":
        return undefined
      case "Store":
        return new IdempotencyStoreFull({ maxRecords: this.maxRecords })
      case "Scope":
        return new IdempotencyStoreFull({ maxRecords: this.maxRecordsPerScope, perScope: true })
    }
  }
}

const build = (maxRecords: number, maxRecordsPerScope: number) => {
  const table = new Records(maxRecords, maxRecordsPerScope)
  let tokens = 0

  // each operation one effect: the fiber's clock read in place, the answer returned as an exit
  const claim = (request: ClaimRequest) =>
    Effect.withFiberRuntime<ClaimResult, IdempotencyStoreFull>((fiber) => {
      const now = nowOf(fiber)
      table.evict(now)
      const existing = table.get(request.scope, request.key)
      switch (core.decideClaim(existing, request.fingerprint, now)) {
        case "Mismatch":
          return Exit.succeed(mismatch)
        case "Replay":
          return Exit.succeed({ _tag: "Completed", response: existing!.response! })
        case "InProgress":
          return Exit.succeed(inProgress)
        case "New": {
          const full = table.refusal(request.scope, request.key, now)
          if (full !== undefined) return Exit.fail(full)
          break
        }
        case "Reclaim":
          // the owner stopped renewing its lease: a new fencing token refuses its late writes
          break
      }
      const token = `m${++tokens}`
      const times = core.claimed(now, Duration.toMillis(request.lease), Duration.toMillis(request.ttl))
      const record: Record = {
        scope: request.scope,
        fingerprint: request.fingerprint,
        token,
        response: undefined,
        completed: false,
        leaseUntil: times.leaseUntil,
        expiresAt: times.expiresAt,
        version: 0
      }
      table.add(request.key, record)
      table.schedule(request.key, record)
      return Exit.succeed({ _tag: "Claimed", token })
    })

  const owned = (ref: ClaimRef, now: number): Record | undefined => {
    const record = table.get(ref.scope, ref.key)
    return record !== undefined && core.owns(record, ref.token, now) ? record : undefined
  }

  const store: Store & { readonly size: Effect.Effect<number> } = {
    claim,
    complete: (ref, response, ttl) =>
      Effect.withFiberRuntime((fiber) => {
        const now = nowOf(fiber)
        const record = owned(ref, now)
        if (record === undefined) return Exit.succeed(false)
        // a copy: the handler's bytes may be a view into a larger buffer that the record would keep alive
        record.response = { status: response.status, headers: response.headers, body: response.body.slice() }
        record.completed = true
        const times = core.completedAt(now, Duration.toMillis(ttl))
        record.expiresAt = times.expiresAt
        record.leaseUntil = times.leaseUntil
        table.schedule(ref.key, record)
        return Exit.succeed(true)
      }),
    renew: (ref, lease) =>
      Effect.withFiberRuntime((fiber) => {
        const now = nowOf(fiber)
        const record = owned(ref, now)
        if (record === undefined) return Exit.succeed(false)
        const before = core.endOf(record)
        record.leaseUntil = core.renewedLease(now, Duration.toMillis(lease))
        // a lease within the TTL (the usual case) does not move the record's end: its entry still holds
        if (core.endOf(record) !== before) table.schedule(ref.key, record)
        return Exit.succeed(true)
      }),
    release: (ref) =>
      Effect.withFiberRuntime((fiber) => {
        const record = owned(ref, nowOf(fiber))
        if (record !== undefined) table.remove(ref.key, record)
        return Exit.void
      }),
    size: Effect.sync(() => table.size)
  }
  // not part of the public type: lets a test see that the expiry heap stays bounded by the records
  return Object.assign(store, { pendingExpiries: () => table.pendingExpiries })
}

const mismatch: ClaimResult = { _tag: "Mismatch" }
const inProgress: ClaimResult = { _tag: "InProgress" }

/** The memory store as a layer: options checked when called, one store per build of the layer. */
export const layerMemoryWith = (options: MemoryOptions = {}): Layer.Layer<IdempotencyStore> =>
  Layer.effect(IdempotencyStore, makeMemory(options))

export const layerMemory: Layer.Layer<IdempotencyStore> = layerMemoryWith()
