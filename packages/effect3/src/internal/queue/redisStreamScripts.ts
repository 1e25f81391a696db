/**
 * The Lua scripts of the Redis stream queue, ready for `EVALSHA`: their text lives in the core
 * (`core/streamQueueScripts.ts`), shared by both editions.
 */
import * as lua from "@effect-resilience/core/streamQueueScripts"
import * as redisClient from "../redis/client.js"

export const CREATE_GROUP = redisClient.script(lua.CREATE_GROUP)
export const RELEASE = redisClient.script(lua.RELEASE)
export const DEAD_LETTER = redisClient.script(lua.DEAD_LETTER)
export const REDRIVE = redisClient.script(lua.REDRIVE)
export const REDRIVE_ENTRIES = redisClient.script(lua.REDRIVE_ENTRIES)
export const PURGE = redisClient.script(lua.PURGE)
export const PURGE_ENTRIES = redisClient.script(lua.PURGE_ENTRIES)
export const ACK = redisClient.script(lua.ACK)
export const ACK_MANY = redisClient.script(lua.ACK_MANY)
export const EXTEND = redisClient.script(lua.EXTEND)
export const MARK_ALONE = redisClient.script(lua.MARK_ALONE)
export const RECLAIM = redisClient.script(lua.RECLAIM)
