/**
 * The Redis idempotency store: one hash per record, every operation one Lua script, so each is atomic
 * on the server. Its claim script restates the decisions of `core/idempotency.ts` (the memory store's) in Lua.
 *
 * Key: `<prefix>{<scope>:<key>}` (parts escaped, see `escapePart`): the whole identity is the Cluster
 * hash tag, so anything added to a record later (more keys) lands in the same slot.
 * Fields: `fp` fingerprint, `tok` owner token, `done` "0" in progress / "1" completed, `lease` and `exp`
 * (epoch ms of the caller's clock), and once completed `status`, `headers` (JSON), `body` (raw bytes).
 *
 * Time: every decision compares `lease`/`exp` with the `now` the caller passes from its `Clock`, never
 * with Redis' clock, for the same reasons as the rate-limit store: `TestClock` drives the store in
 * tests, and memory and Redis behave alike. Processes sharing a store need NTP-synchronised clocks.
 * The key's own `PEXPIRE` is only garbage collection: it fires the margin after the record has expired,
 * so a caller whose clock is behind (or a `TestClock`) never sees a record vanish early.
 */
import { Clock, Duration, Effect, Layer } from "effect"
import { randomFillSync } from "node:crypto"
import type { ClaimRef, ClaimRequest, ClaimResult, Store, StoredResponse } from "../../IdempotencyStore.js"
import * as redis from "../redis/client.js"
import {
  checkConnection,
  type CommonOptions,
  escapePart,
  idempotencyDefaults,
  resolve,
  type Resolved
} from "../redis/options.js"
import { IdempotencyStore, IdempotencyStoreError } from "./service.js"

export type Options = redis.ClientOptions & CommonOptions & {
  readonly waitReplicas?: redis.WaitReplicasOption
}

const CLAIMED = 0
const IN_PROGRESS = 1
const COMPLETED = 2
const MISMATCH = 3

/** KEYS[1] record; ARGV now, fingerprint, new token, lease ms, ttl ms, gc margin ms. */
const claimScript = redis.script(`${redis.luaPrelude}
local now = tonumber(ARGV[1])
local r = redis.call("HMGET", KEYS[1], "fp", "done", "lease", "exp")
if r[1] and tonumber(r[4]) > now then
  if r[1] ~= ARGV[2] then return {${MISMATCH}} end
  if r[2] == "1" then
    local s = redis.call("HMGET", KEYS[1], "status", "headers", "body")
    return {${COMPLETED}, s[1], s[2], s[3]}
  end
  if tonumber(r[3]) > now then return {${IN_PROGRESS}} end
end
-- absent, expired, or in progress with a lapsed lease (its owner stopped renewing): a new claim
local lease = tonumber(ARGV[4])
local ttl = tonumber(ARGV[5])
redis.call("DEL", KEYS[1])
redis.call("HSET", KEYS[1], "fp", ARGV[2], "tok", ARGV[3], "done", "0", "lease", num(now + lease), "exp", num(now + ttl))
redis.call("PEXPIRE", KEYS[1], px(math.max(lease, ttl) + tonumber(ARGV[6])))
return {${CLAIMED}}
`)

/** The owner check shared by complete, renew and release: the token matches, in progress, not expired. */
const owned = `
local now = tonumber(ARGV[1])
local r = redis.call("HMGET", KEYS[1], "tok", "done", "exp")
if r[1] ~= ARGV[2] or r[2] ~= "0" or tonumber(r[3]) <= now then return 0 end
`

/** KEYS[1] record; ARGV now, token, ttl ms, gc margin ms, status, headers JSON, body. */
const completeScript = redis.script(`${redis.luaPrelude}${owned}
local ttl = tonumber(ARGV[3])
redis.call("HSET", KEYS[1], "done", "1", "lease", "0", "exp", num(now + ttl),
  "status", ARGV[5], "headers", ARGV[6], "body", ARGV[7])
redis.call("PEXPIRE", KEYS[1], px(ttl + tonumber(ARGV[4])))
return 1
`)

/** KEYS[1] record; ARGV now, token, lease ms, gc margin ms. */
const renewScript = redis.script(`${redis.luaPrelude}${owned}
local lease = tonumber(ARGV[3])
redis.call("HSET", KEYS[1], "lease", num(now + lease))
redis.call("PEXPIRE", KEYS[1], px(math.max(lease, tonumber(r[3]) - now) + tonumber(ARGV[4])))
return 1
`)

/** KEYS[1] record; ARGV now, token. */
const releaseScript = redis.script(`${owned}
redis.call("DEL", KEYS[1])
return 1
`)

export const keyOf = (prefix: string, scope: string, key: string): string =>
  `${prefix}{${escapePart(scope)}:${escapePart(key)}}`

/**
 * Random bytes for {@link newToken}, filled 256 tokens at a time: one call into the CSPRNG per 256 claims
 * instead of one each (~2 µs a claim on Node 20), as `crypto.randomUUID` pools its own.
 */
const tokenPool = Buffer.alloc(12 * 256)
let tokenAt = tokenPool.length

/** A fencing token no other claim, process or run uses: 12 bytes of the CSPRNG. */
const newToken = (): string => {
  if (tokenAt === tokenPool.length) {
    randomFillSync(tokenPool)
    tokenAt = 0
  }
  const token = tokenPool.toString("base64url", tokenAt, tokenAt + 12)
  tokenAt += 12
  return token
}

const text = (value: unknown): string => Buffer.isBuffer(value) ? value.toString("utf8") : String(value)

const decodeResponse = (reply: ReadonlyArray<unknown>): StoredResponse => {
  const [, status, headers, body] = reply
  if (!Buffer.isBuffer(body)) throw new Error("corrupt idempotency record: no body")
  const parsed: unknown = JSON.parse(text(headers))
  if (typeof parsed !== "object" || parsed === null) throw new Error("corrupt idempotency record: headers")
  return {
    status: Number(text(status)),
    headers: parsed as Record<string, string>,
    body: new Uint8Array(body) // a copy: ioredis may hand out a slice of its read buffer
  }
}

/**
 * With `waitReplicas`, claim, complete and renew are each followed by `WAIT`: the writes whose loss in a
 * failover could let a handler run twice (a lost claim or completion frees the key, a lost renewal shortens
 * the lease). A release is not: losing one only keeps the key until its lease runs out.
 */
export const make = (client: redis.Client, options: Resolved, wait?: redis.WaitReplicas): Store => {
  const margin = redis.millisArg(options.marginMillis)
  const run = <A>(
    operation: IdempotencyStoreError["operation"],
    s: redis.Script,
    key: string,
    args: ReadonlyArray<string | Buffer>,
    buffers: boolean,
    decode: (reply: unknown) => A
  ): Effect.Effect<A, IdempotencyStoreError> =>
    redis.runScript(
      client,
      s,
      [key],
      args,
      buffers,
      options.timeoutMillis,
      decode,
      (cause) => new IdempotencyStoreError({ operation, cause }),
      operation === "release" ? undefined : wait
    )

  const claim = (request: ClaimRequest): Effect.Effect<ClaimResult, IdempotencyStoreError> =>
    Clock.clockWith((clock) => {
      const token = newToken()
      return run(
        "claim",
        claimScript,
        keyOf(options.prefix, request.scope, request.key),
        [
          String(clock.unsafeCurrentTimeMillis()),
          request.fingerprint,
          token,
          redis.millisArg(Duration.toMillis(request.lease)),
          redis.millisArg(Duration.toMillis(request.ttl)),
          margin
        ],
        true,
        (reply): ClaimResult => {
          if (!Array.isArray(reply)) throw new Error(`unexpected reply to claim: ${String(reply)}`)
          switch (reply[0]) {
            case CLAIMED:
              return { _tag: "Claimed", token }
            case IN_PROGRESS:
              return { _tag: "InProgress" }
            case COMPLETED:
              return { _tag: "Completed", response: decodeResponse(reply) }
            case MISMATCH:
              return { _tag: "Mismatch" }
          }
          throw new Error(`unexpected reply to claim: ${String(reply[0])}`)
        }
      )
    })

  const ownerCall = <A>(
    operation: IdempotencyStoreError["operation"],
    s: redis.Script,
    ref: ClaimRef,
    args: ReadonlyArray<string | Buffer>,
    decode: (reply: unknown) => A
  ) =>
    Clock.clockWith((clock) =>
      run(
        operation,
        s,
        keyOf(options.prefix, ref.scope, ref.key),
        [
          String(clock.unsafeCurrentTimeMillis()),
          ref.token,
          ...args
        ],
        false,
        decode
      )
    )

  const isOne = (reply: unknown): boolean => reply === 1

  return {
    claim,
    complete: (ref, response, ttl) =>
      ownerCall("complete", completeScript, ref, [
        redis.millisArg(Duration.toMillis(ttl)),
        margin,
        String(response.status),
        JSON.stringify(response.headers),
        Buffer.from(response.body.buffer, response.body.byteOffset, response.body.byteLength)
      ], isOne),
    renew: (ref, lease) =>
      ownerCall("renew", renewScript, ref, [redis.millisArg(Duration.toMillis(lease)), margin], isOne),
    release: (ref) => ownerCall("release", releaseScript, ref, [], () => undefined)
  }
}

export const layer = (options: Options): Layer.Layer<IdempotencyStore> => {
  checkConnection("IdempotencyStore/Redis", options)
  const resolved = resolve("IdempotencyStore/Redis", options, idempotencyDefaults)
  const wait = redis.resolveWaitReplicas("IdempotencyStore/Redis", options.waitReplicas, resolved.timeoutMillis)
  return Layer.scoped(
    IdempotencyStore,
    // the claims and completions of many requests at once: one write (and one wake-up of Redis) per batch
    Effect.map(redis.acquire(options, { autoPipelining: true }), (client) => make(client, resolved, wait))
  )
}
