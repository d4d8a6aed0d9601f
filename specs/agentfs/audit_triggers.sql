-- Guards of the tool call audit trail (spec: Tool Calls, consistency rules
-- 1, 3, 4 and 5), installed as TEMP triggers on every connection ClawOS
-- opens to a workspace (agentfs::configure_connection). TEMP triggers live
-- in the connection, not in the file: the reference SDK's engine refuses a
-- database that stores triggers, so none are stored. What a process that
-- skips these guards changes, the hash chain shows
-- (clawos_tool_call_chain, specs/agentfs/README.md, "The audit trail").

CREATE TEMP TRIGGER IF NOT EXISTS clawos_guard_tool_calls_insert
BEFORE INSERT ON main.tool_calls
BEGIN
  SELECT RAISE(ABORT, 'tool_calls: exactly one of result or error must be set')
    WHERE (NEW.result IS NULL) = (NEW.error IS NULL);
  SELECT RAISE(ABORT, 'tool_calls: duration_ms must equal (completed_at - started_at) * 1000')
    WHERE NEW.duration_ms IS NOT (NEW.completed_at - NEW.started_at) * 1000;
  SELECT RAISE(ABORT, 'tool_calls: parameters must be valid JSON')
    WHERE NEW.parameters IS NOT NULL AND NOT json_valid(NEW.parameters);
  SELECT RAISE(ABORT, 'tool_calls: result must be valid JSON')
    WHERE NEW.result IS NOT NULL AND NOT json_valid(NEW.result);
END;

CREATE TEMP TRIGGER IF NOT EXISTS clawos_guard_tool_calls_update
BEFORE UPDATE ON main.tool_calls
BEGIN
  SELECT RAISE(ABORT, 'tool_calls is an insert-only audit log');
END;

CREATE TEMP TRIGGER IF NOT EXISTS clawos_guard_tool_calls_delete
BEFORE DELETE ON main.tool_calls
BEGIN
  SELECT RAISE(ABORT, 'tool_calls is an insert-only audit log');
END;

CREATE TEMP TRIGGER IF NOT EXISTS clawos_guard_tool_call_meta_update
BEFORE UPDATE ON main.clawos_tool_call_meta
BEGIN
  SELECT RAISE(ABORT, 'clawos_tool_call_meta is an insert-only audit log');
END;

CREATE TEMP TRIGGER IF NOT EXISTS clawos_guard_tool_call_meta_delete
BEFORE DELETE ON main.clawos_tool_call_meta
BEGIN
  SELECT RAISE(ABORT, 'clawos_tool_call_meta is an insert-only audit log');
END;

CREATE TEMP TRIGGER IF NOT EXISTS clawos_guard_tool_call_key_update
BEFORE UPDATE ON main.clawos_tool_call_key
BEGIN
  SELECT RAISE(ABORT, 'clawos_tool_call_key is an insert-only audit log');
END;

CREATE TEMP TRIGGER IF NOT EXISTS clawos_guard_tool_call_key_delete
BEFORE DELETE ON main.clawos_tool_call_key
BEGIN
  SELECT RAISE(ABORT, 'clawos_tool_call_key is an insert-only audit log');
END;

CREATE TEMP TRIGGER IF NOT EXISTS clawos_guard_tool_call_chain_update
BEFORE UPDATE ON main.clawos_tool_call_chain
BEGIN
  SELECT RAISE(ABORT, 'clawos_tool_call_chain is an insert-only audit log');
END;

CREATE TEMP TRIGGER IF NOT EXISTS clawos_guard_tool_call_chain_delete
BEFORE DELETE ON main.clawos_tool_call_chain
BEGIN
  SELECT RAISE(ABORT, 'clawos_tool_call_chain is an insert-only audit log');
END;
