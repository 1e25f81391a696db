import { Batches, type Member } from "@effect-resilience/core/batch"
import { Cause, Effect, Option } from "effect"
import type { ClaimRef } from "../../IdempotencyStore.js"
import type { batchedQueries, queries, WrittenRow } from "./sqlQueries.js"

/*
 * Group commit for the SQL store's claims and completions (`core/batch.ts`): operations that arrive while a
 * statement of their kind is in flight go out together, as one statement and one commit. A burst of 32 new keys
 * costs a few statements instead of 32, where every statement is a commit (a WAL flush on PostgreSQL) and a
 * round trip; one request alone is sent at the end of its tick.
 */

/** Statements of one kind in flight at once (each holds a connection of the pool while it runs). */
const MAX_IN_FLIGHT = 2
/** Operations in one statement, at most (64 completions are 512 parameters: far below PostgreSQL's 65,535). */
const MAX_WIDTH = 64

interface Waiting<I, O> extends Member {
  readonly input: I
  readonly resume: (effect: Effect.Effect<O, unknown>) => void
}

/**
 * Sends the operations of one kind in batches: `run` answers a batch's inputs, in order, with one statement.
 * When a batch of several fails with a failure `ownFailure` accepts (a row's own, not the connection's), its
 * operations are sent again one by one, so that one bad row fails only its own operation; any other failure,
 * defect or interruption is every operation's of the batch (a lost connection is retried by each operation,
 * see `retryBroken` in `sql.ts`). Statements run in fibers that `fork` starts (from the store's runtime).
 *
 * The caller waits without a fiber of its own; interrupted before its batch went out, it leaves the queue.
 */
const batcher = <I, O>(
  fork: (effect: Effect.Effect<void>) => void,
  run: (inputs: ReadonlyArray<I>) => Effect.Effect<ReadonlyArray<O>, unknown>,
  ownFailure: (error: unknown) => boolean
) => {
  const batches = new Batches<Waiting<I, O>>(MAX_IN_FLIGHT, MAX_WIDTH)

  const send = (members: ReadonlyArray<Waiting<I, O>>): Effect.Effect<void> =>
    // suspended: a statement that throws while it is built fails its members (and frees its slot) as a defect
    Effect.matchCauseEffect(Effect.suspend(() => run(members.map((member) => member.input))), {
      onSuccess: (outputs) =>
        Effect.sync(() => {
          for (let i = 0; i < members.length; i++) members[i]!.resume(Effect.succeed(outputs[i]!))
        }),
      onFailure: (cause) => {
        if (members.length > 1 && Option.exists(Cause.failureOption(cause), ownFailure)) {
          return Effect.forEach(members, (member) => send([member]), { discard: true })
        }
        const failed = Effect.failCause(cause)
        return Effect.sync(() => {
          for (const member of members) member.resume(failed)
        })
      }
    })

  // what queued while a statement was in flight leaves as soon as one may go
  const drain: Effect.Effect<void> = Effect.suspend(() => {
    for (let batch = batches.next(); batch !== undefined; batch = batches.next()) {
      fork(Effect.ensuring(send(batch), Effect.suspend(() => (batches.done(), drain))))
    }
    return Effect.void
  })
  // the first of a quiet moment waits for the rest of its tick
  const scheduled = Effect.zipRight(Effect.yieldNow(), drain)

  return (key: string, input: I): Effect.Effect<O, unknown> =>
    Effect.async<O, unknown>((resume) => {
      const member: Waiting<I, O> = { key, input, resume }
      if (batches.add(member)) fork(scheduled)
      return Effect.sync(() => batches.remove(member))
    })
}

export interface NewClaim {
  readonly scope: string
  readonly key: string
  readonly fingerprint: string
  readonly token: string
  readonly leaseUntil: number
  readonly expiresAt: number
  readonly now: number
}

export interface Completion {
  readonly status: number
  readonly headers: string
  readonly body: Uint8Array
  readonly expiresAt: number
  readonly ref: ClaimRef
  readonly now: number
}

const rowId = (scope: string, key: string) => `${scope}\u0000${key}`
const writtenId = (row: WrittenRow) => `${row.scope}\u0000${row.key}\u0000${row.token}`

export interface Writes {
  /** Whether the claim took the row (new, expired, or its lease ran out). */
  readonly claim: (claim: NewClaim) => Effect.Effect<boolean, unknown>
  /** Whether the completion stored the response (the claim was still its owner's). */
  readonly complete: (completion: Completion) => Effect.Effect<boolean, unknown>
}

/** A statement each, as SQLite takes them (its driver is synchronous: one connection, no round trip to share). */
export const singleWrites = ({ completion, upsert }: ReturnType<typeof queries>): Writes => ({
  claim: (c) =>
    Effect.map(
      upsert(c.scope, c.key, c.fingerprint, c.token, c.leaseUntil, c.expiresAt, c.now),
      (rows) => rows.length > 0
    ),
  complete: (c) =>
    Effect.map(
      completion(c.status, c.headers, c.body, c.expiresAt, c.ref.scope, c.ref.key, c.ref.token, c.now),
      (rows) => rows.length > 0
    )
})

/**
 * The claims' and the completions' statements batched (`batcher`), on PostgreSQL: each operation answers whether
 * its row was written, as the single statements' `RETURNING` does.
 */
export const batchedWrites = (
  statements: ReturnType<typeof batchedQueries>,
  fork: (effect: Effect.Effect<void>) => void,
  ownFailure: (error: unknown) => boolean
): Writes => {
  const { completionBatch, upsertBatch } = statements
  const writtenOf = (refs: ReadonlyArray<WrittenRow>) => (rows: ReadonlyArray<WrittenRow>) => {
    const ids = new Set(rows.map(writtenId))
    return refs.map((ref) => ids.has(writtenId(ref)))
  }
  const claim = batcher(fork, (claims: ReadonlyArray<NewClaim>) => {
    // one `now` for the batch: the oldest claim's (see `upsertBatch`)
    const params: Array<unknown> = [claims[0]!.now]
    for (const c of claims) {
      if (c.now < (params[0] as number)) params[0] = c.now
      params.push(c.scope, c.key, c.fingerprint, c.token, c.leaseUntil, c.expiresAt)
    }
    return Effect.map(upsertBatch(claims.length, params), writtenOf(claims))
  }, ownFailure)
  const complete = batcher(fork, (completions: ReadonlyArray<Completion>) => {
    const params: Array<unknown> = []
    for (const c of completions) {
      params.push(c.status, c.headers, c.body, c.expiresAt, c.ref.scope, c.ref.key, c.ref.token, c.now)
    }
    return Effect.map(completionBatch(completions.length, params), writtenOf(completions.map((c) => c.ref)))
  }, ownFailure)
  return {
    claim: (c) => claim(rowId(c.scope, c.key), c),
    complete: (c) => complete(rowId(c.ref.scope, c.ref.key), c)
  }
}
