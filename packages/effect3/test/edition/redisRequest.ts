/**
 * The deadline of every Redis call, `src/internal/redis/request.ts` (the same module in both editions; the suite
 * redisRequest.test.ts reaches it here, as it is internal).
 */
export { RedisTimeout, request as redisRequest, requestOr as redisRequestOr } from "../../src/internal/redis/request.js"
