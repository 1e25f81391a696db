/**
 * The memory idempotency store: a map of records, the claim decisions of `core/idempotency.ts`, and
 * expiry from a binary heap. The decisions are the SQL and Redis stores' too.
 */
import { Clock, Duration, Effect, Layer } from "effect"
import * as core from "../../core/idempotency.js"
import type {
  ClaimRef,
  ClaimRequest,
  ClaimResult,
  MemoryOptions,
  Store,
  StoredResponse
} from "../../IdempotencyStore.js"
import { MinHeap } from "../heap.js"
import * as validate from "../validate.js"
import { IdempotencyStore, IdempotencyStoreFull } from "./service.js"

interface Record {
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
  readonly id: string
  readonly version: number
}

/** Expired records removed per call at most: keeps every call O(log n) while still draining backlogs. */
const EVICT_PER_CALL = 16

export const makeMemory = (options: MemoryOptions = {}) => {
  const maxRecords = validate.positiveInt("IdempotencyStore memory maxRecords", options.maxRecords ?? 10_000, {
    allowInfinity: true
  })
  return Effect.sync(() => build(maxRecords))
}

const build = (maxRecords: number) => {
  const records = new Map<string, Record>()
  let expiries = new MinHeap<Expiry>()
  let tokens = 0
  // one sequence for the whole store: a replacement record must never match a heap entry of the record
  // it replaced (a per-record counter would start again and let old entries evict the new record early)
  let writes = 0

  const schedule = (id: string, record: Record) => {
    record.version = ++writes
    expiries.push({ at: core.endOf(record), id, version: record.version })
    // Released records leave their entries behind until those come due (a TTL away): when stale entries
    // outnumber live records, rebuild from the records, so the heap stays O(records), amortised O(1) a write.
    if (expiries.size > 2 * records.size + 1_024) {
      expiries = new MinHeap<Expiry>()
      for (const [key, live] of records) expiries.push({ at: core.endOf(live), id: key, version: live.version })
    }
  }

  const evict = (now: number, limit = EVICT_PER_CALL) => {
    for (let i = 0; i < limit; i++) {
      const next = expiries.peek()
      if (next === undefined || next.at > now) return
      expiries.pop()
      const record = records.get(next.id)
      if (record !== undefined && record.version === next.version) records.delete(next.id)
    }
  }

  const idOf = (scope: string, key: string) => `${scope.length}:${scope}${key}`

  const claim = (request: ClaimRequest) =>
    Clock.clockWith((clock) =>
      Effect.suspend((): Effect.Effect<ClaimResult, IdempotencyStoreFull> => {
        const now = clock.unsafeCurrentTimeMillis()
        evict(now)
        const id = idOf(request.scope, request.key)
        const existing = records.get(id)
        switch (core.decideClaim(existing, request.fingerprint, now)) {
          case "Mismatch":
            return Effect.succeed({ _tag: "Mismatch" })
          case "Replay":
            return Effect.succeed({ _tag: "Completed", response: existing!.response! })
          case "InProgress":
            return Effect.succeed({ _tag: "InProgress" })
          case "New":
            if (records.size >= maxRecords) {
              // make room from expired records only, never from live claims or stored responses
              evict(now, Infinity)
              if (records.size >= maxRecords) return Effect.fail(new IdempotencyStoreFull({ maxRecords }))
            }
            break
          case "Reclaim":
            // the owner stopped renewing its lease: a new fencing token refuses its late writes
            break
        }
        const token = `m${++tokens}`
        const times = core.claimed(now, Duration.toMillis(request.lease), Duration.toMillis(request.ttl))
        const record: Record = {
          fingerprint: request.fingerprint,
          token,
          response: undefined,
          completed: false,
          leaseUntil: times.leaseUntil,
          expiresAt: times.expiresAt,
          version: 0
        }
        records.set(id, record)
        schedule(id, record)
        return Effect.succeed({ _tag: "Claimed", token })
      })
    )

  const owned = (ref: ClaimRef, now: number): Record | undefined => {
    const record = records.get(idOf(ref.scope, ref.key))
    return record !== undefined && core.owns(record, ref.token, now) ? record : undefined
  }

  const store: Store & { readonly size: Effect.Effect<number> } = {
    claim,
    complete: (ref, response, ttl) =>
      Clock.clockWith((clock) =>
        Effect.sync(() => {
          const now = clock.unsafeCurrentTimeMillis()
          const record = owned(ref, now)
          if (record === undefined) return false
          // a copy: the handler's bytes may be a view into a larger buffer that the record would keep alive
          record.response = { ...response, body: response.body.slice() }
          record.completed = true
          const times = core.completedAt(now, Duration.toMillis(ttl))
          record.expiresAt = times.expiresAt
          record.leaseUntil = times.leaseUntil
          schedule(idOf(ref.scope, ref.key), record)
          return true
        })
      ),
    renew: (ref, lease) =>
      Clock.clockWith((clock) =>
        Effect.sync(() => {
          const now = clock.unsafeCurrentTimeMillis()
          const record = owned(ref, now)
          if (record === undefined) return false
          const before = core.endOf(record)
          record.leaseUntil = core.renewedLease(now, Duration.toMillis(lease))
          // a lease within the TTL (the usual case) does not move the record's end: its entry still holds
          if (core.endOf(record) !== before) schedule(idOf(ref.scope, ref.key), record)
          return true
        })
      ),
    release: (ref) =>
      Clock.clockWith((clock) =>
        Effect.sync(() => {
          if (owned(ref, clock.unsafeCurrentTimeMillis()) !== undefined) records.delete(idOf(ref.scope, ref.key))
        })
      ),
    size: Effect.sync(() => records.size)
  }
  // not part of the public type: lets a test see that the expiry heap stays bounded by the records
  return Object.assign(store, { pendingExpiries: () => expiries.size })
}

/** The memory store as a layer: options checked when called, one store per build of the layer. */
export const layerMemoryWith = (options: MemoryOptions = {}): Layer.Layer<IdempotencyStore> =>
  Layer.effect(IdempotencyStore, makeMemory(options))

export const layerMemory: Layer.Layer<IdempotencyStore> = layerMemoryWith()
