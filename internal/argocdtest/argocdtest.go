// Package argocdtest runs the Argo CD health checks of deploy/argocd as Argo CD does (the
// object as the Lua table obj, the script returning {status, message}), in gopher-lua, for
// tests on the objects the operator writes.
package argocdtest

import (
	"encoding/json"
	"fmt"
	"os"

	lua "github.com/yuin/gopher-lua"
)

// Health is the status the health check in the file script gives obj.
func Health(script string, obj any) (string, error) {
	code, err := os.ReadFile(script)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", script, err)
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return "", fmt.Errorf("encode the object: %w", err)
	}
	var decoded any
	if err := json.Unmarshal(data, &decoded); err != nil {
		return "", fmt.Errorf("decode the object: %w", err)
	}
	L := lua.NewState()
	defer L.Close()
	L.SetGlobal("obj", toLua(L, decoded))
	fn, err := L.LoadString(string(code))
	if err != nil {
		return "", fmt.Errorf("load %s: %w", script, err)
	}
	L.Push(fn)
	if err := L.PCall(0, 1, nil); err != nil {
		return "", fmt.Errorf("run %s: %w", script, err)
	}
	hs, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		return "", fmt.Errorf("%s returned %s, not a table", script, L.Get(-1).Type())
	}
	return lua.LVAsString(hs.RawGetString("status")), nil
}

// toLua converts decoded JSON to Lua values: objects and arrays to tables (arrays from 1).
func toLua(L *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := L.NewTable()
		for k, e := range v {
			t.RawSetString(k, toLua(L, e))
		}
		return t
	case []any:
		t := L.NewTable()
		for _, e := range v {
			t.Append(toLua(L, e))
		}
		return t
	case string:
		return lua.LString(v)
	case float64:
		return lua.LNumber(v)
	case bool:
		return lua.LBool(v)
	default:
		return lua.LNil
	}
}
