-- Database-enforced rules of the tool call audit trail (spec: Tool Calls,
-- consistency rules 1, 3, 4 and 5). Installed only when ClawOS creates the
-- workspace: workspaces made by other implementations keep their own rules.

CREATE TRIGGER IF NOT EXISTS tool_calls_validate_insert
BEFORE INSERT ON tool_calls
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

CREATE TRIGGER IF NOT EXISTS tool_calls_reject_update
BEFORE UPDATE ON tool_calls
BEGIN
  SELECT RAISE(ABORT, 'tool_calls is an insert-only audit log');
END;

CREATE TRIGGER IF NOT EXISTS tool_calls_reject_delete
BEFORE DELETE ON tool_calls
BEGIN
  SELECT RAISE(ABORT, 'tool_calls is an insert-only audit log');
END;

CREATE TRIGGER IF NOT EXISTS clawos_tool_call_meta_reject_update
BEFORE UPDATE ON clawos_tool_call_meta
BEGIN
  SELECT RAISE(ABORT, 'clawos_tool_call_meta is an insert-only audit log');
END;

CREATE TRIGGER IF NOT EXISTS clawos_tool_call_meta_reject_delete
BEFORE DELETE ON clawos_tool_call_meta
BEGIN
  SELECT RAISE(ABORT, 'clawos_tool_call_meta is an insert-only audit log');
END;

CREATE TRIGGER IF NOT EXISTS clawos_tool_call_key_reject_update
BEFORE UPDATE ON clawos_tool_call_key
BEGIN
  SELECT RAISE(ABORT, 'clawos_tool_call_key is an insert-only audit log');
END;

CREATE TRIGGER IF NOT EXISTS clawos_tool_call_key_reject_delete
BEFORE DELETE ON clawos_tool_call_key
BEGIN
  SELECT RAISE(ABORT, 'clawos_tool_call_key is an insert-only audit log');
END;
