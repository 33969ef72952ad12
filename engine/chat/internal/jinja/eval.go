package jinja

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

var (
	errBreak    = errors.New("break")
	errContinue = errors.New("continue")
)

// =============================================================================
// Scope
// =============================================================================

type scope struct {
	vars   map[string]Value
	parent *scope
}

func newScope(parent *scope) *scope {
	return &scope{vars: make(map[string]Value, 4), parent: parent}
}

func (s *scope) get(name string) (Value, bool) {
	if v, ok := s.vars[name]; ok {
		return v, true
	}
	if s.parent != nil {
		return s.parent.get(name)
	}
	return Undefined(), false
}

func (s *scope) set(name string, val Value) {
	s.vars[name] = val
}

// =============================================================================
// Evaluator
// =============================================================================

type evaluator struct {
	scope    *scope
	builtins *scope
	m        *meter
	output   buf
}

// sub is an evaluator for a nested body (macro, caller, set block, filter
// block): its own output, the same meter.
func (e *evaluator) sub(s *scope) *evaluator {
	return &evaluator{scope: s, builtins: e.builtins, m: e.m, output: buf{m: e.m}}
}

// write appends to the output, charged first.
func (e *evaluator) write(s string) error {
	if !e.output.put(s) {
		return e.m.err
	}
	return nil
}

func (e *evaluator) execNodes(nodes []node) error {
	for _, n := range nodes {
		if err := e.execNode(n); err != nil {
			return err
		}
	}
	return nil
}

func (e *evaluator) execNode(n node) error {
	if err := e.execNode0(n); err != nil {
		return err
	}
	return e.m.err
}

func (e *evaluator) execNode0(n node) error {
	switch nd := n.(type) {
	case *textNode:
		return e.write(nd.text)

	case *outputNode:
		val, err := e.evalExpr(nd.expression)
		if err != nil {
			return err
		}
		return e.write(e.m.print(val))

	case *ifNode:
		return e.execIf(nd)

	case *forNode:
		return e.execFor(nd)

	case *setNode:
		return e.execSet(nd)

	case *setBlockNode:
		return e.execSetBlock(nd)

	case *macroNode:
		return e.execMacro(nd)

	case *callNode:
		return e.execCall(nd)

	case *filterBlockNode:
		return e.execFilterBlock(nd)

	case *breakNode:
		return errBreak

	case *continueNode:
		return errContinue

	default:
		return fmt.Errorf("unknown node type %T", n)
	}
}

func (e *evaluator) execIf(n *ifNode) error {
	for _, branch := range n.branches {
		if branch.condition == nil {
			// else branch
			return e.execNodes(branch.body)
		}
		cond, err := e.evalExpr(branch.condition)
		if err != nil {
			return err
		}
		if cond.IsTruthy() {
			return e.execNodes(branch.body)
		}
	}
	return nil
}

func (e *evaluator) execFor(n *forNode) error {
	iterVal, err := e.evalExpr(n.iter)
	if err != nil {
		return err
	}

	var items []Value
	switch {
	case iterVal.IsList():
		items = iterVal.AsList().Items
	case iterVal.IsDict():
		d := iterVal.AsDict()
		if !e.m.chargeNew(len(d.Keys)) {
			return e.m.err
		}
		items = make([]Value, 0, len(d.Keys))
		for _, key := range d.Keys {
			items = append(items, NewString(key))
		}
	case iterVal.IsString():
		s := iterVal.AsString()
		n := utf8.RuneCountInString(s)
		if !e.m.chargeNew(n) || !e.m.chargeMul(int64(n), 4) {
			return e.m.err
		}
		items = make([]Value, 0, n)
		for _, r := range s {
			items = append(items, NewString(string(r)))
		}
	default:
		// Empty iteration.
	}

	// Apply filter if present.
	if n.filterExpr != nil {
		if !e.m.chargeValues(len(items)) {
			return e.m.err
		}
		filtered := make([]Value, 0, len(items))
		for _, item := range items {
			child := newScope(e.scope)
			child.set(n.valVar, item)
			old := e.scope
			e.scope = child
			fv, err := e.evalExpr(n.filterExpr)
			e.scope = old
			if err != nil {
				return err
			}
			if fv.IsTruthy() {
				filtered = append(filtered, item)
			}
		}
		items = filtered
	}

	if len(items) == 0 {
		if n.elseBody != nil {
			return e.execNodes(n.elseBody)
		}
		return nil
	}

	total := int64(len(items))

	// Pre-allocate the loop dict and child scope once, then reuse them
	// across iterations to avoid per-iteration allocations.
	loop := NewDict()
	ld := loop.AsDict()
	ld.Set("length", NewInt(total))

	child := newScope(e.scope)
	child.set("loop", loop)

	for i, item := range items {
		// Set loop variable(s).
		if n.keyVar != "" {
			// Destructuring: for key, val in items
			if item.IsList() && item.AsList().Len() >= 2 {
				child.set(n.keyVar, item.AsList().Get(0))
				child.set(n.valVar, item.AsList().Get(1))
			} else {
				child.set(n.keyVar, NewInt(int64(i)))
				child.set(n.valVar, item)
			}
		} else {
			child.set(n.valVar, item)
		}

		// Update loop object for this iteration.
		idx := int64(i)
		ld.Data["index"] = NewInt(idx + 1)
		ld.Data["index0"] = NewInt(idx)
		ld.Data["revindex"] = NewInt(total - idx)
		ld.Data["revindex0"] = NewInt(total - idx - 1)
		ld.Data["first"] = NewBool(i == 0)
		ld.Data["last"] = NewBool(i == len(items)-1)

		if i > 0 {
			ld.Data["previtem"] = items[i-1]
		} else {
			ld.Data["previtem"] = Undefined()
		}
		if i < len(items)-1 {
			ld.Data["nextitem"] = items[i+1]
		} else {
			ld.Data["nextitem"] = Undefined()
		}

		// cycle function — capture idx by value for closure correctness.
		cycleIdx := idx
		ld.Data["cycle"] = NewCallable("loop.cycle", func(args []Value, kwargs map[string]Value) (Value, error) {
			if len(args) == 0 {
				return Undefined(), nil
			}
			return args[int(cycleIdx)%len(args)], nil
		})

		old := e.scope
		e.scope = child

		err := e.execNodes(n.body)
		e.scope = old

		if err != nil {
			if errors.Is(err, errBreak) {
				break
			}
			if errors.Is(err, errContinue) {
				continue
			}
			return err
		}
	}

	return nil
}

func (e *evaluator) execSet(n *setNode) error {
	val, err := e.evalExpr(n.value)
	if err != nil {
		return err
	}

	if n.namespace != "" {
		nsVal, ok := e.scope.get(n.namespace)
		if !ok || !nsVal.IsDict() {
			return fmt.Errorf("set: namespace %q not found or not a dict", n.namespace)
		}
		nsVal.AsDict().Set(n.target, val)
		return nil
	}

	e.scope.set(n.target, val)
	return nil
}

func (e *evaluator) execSetBlock(n *setBlockNode) error {
	bodyEval := e.sub(e.scope)
	if err := bodyEval.execNodes(n.body); err != nil {
		return err
	}
	e.scope.set(n.target, NewString(bodyEval.output.String()))
	return nil
}

func (e *evaluator) execMacro(n *macroNode) error {
	// Capture the macro body and params.
	params := n.params
	body := n.body
	parentScope := e.scope

	fn := NewCallable(n.name, func(args []Value, kwargs map[string]Value) (Value, error) {
		child := newScope(parentScope)

		// Bind positional args.
		for i, param := range params {
			if i < len(args) {
				child.set(param.name, args[i])
			} else if v, ok := kwargs[param.name]; ok {
				child.set(param.name, v)
			} else if param.defaultVal != nil {
				defEval := e.sub(child)
				defVal, err := defEval.evalExpr(param.defaultVal)
				if err != nil {
					return Undefined(), err
				}
				child.set(param.name, defVal)
			} else {
				child.set(param.name, Undefined())
			}
		}

		// Set caller if available.
		if caller, ok := kwargs["caller"]; ok {
			child.set("caller", caller)
		}

		macroEval := e.sub(child)

		if err := macroEval.execNodes(body); err != nil {
			return Undefined(), err
		}

		return NewString(macroEval.output.String()), nil
	})

	e.scope.set(n.name, fn)
	return nil
}

func (e *evaluator) execCall(n *callNode) error {
	// Create a caller callable that renders the body.
	callerArgs := n.callerArgs
	body := n.body
	parentScope := e.scope

	caller := NewCallable("caller", func(args []Value, kwargs map[string]Value) (Value, error) {
		child := newScope(parentScope)
		for i, argName := range callerArgs {
			if i < len(args) {
				child.set(argName, args[i])
			}
		}

		callerEval := e.sub(child)
		if err := callerEval.execNodes(body); err != nil {
			return Undefined(), err
		}
		return NewString(callerEval.output.String()), nil
	})

	// Evaluate the call expression with caller in kwargs.
	callEx, ok := n.expr.(*callExpr)
	if ok {
		fn, err := e.evalExpr(callEx.fn)
		if err != nil {
			return err
		}
		if !fn.IsCallable() {
			return fmt.Errorf("call: expression is not callable")
		}

		var args []Value
		for _, a := range callEx.args {
			av, err := e.evalExpr(a)
			if err != nil {
				return err
			}
			args = append(args, av)
		}

		kwargs := map[string]Value{"caller": caller}
		for _, kw := range callEx.kwargs {
			v, err := e.evalExpr(kw.value)
			if err != nil {
				return err
			}
			kwargs[kw.name] = v
		}

		result, err := fn.AsCallable().Fn(args, kwargs)
		if err != nil {
			return err
		}
		return e.write(e.m.print(result))
	}

	// Fallback: evaluate expression and call with caller.
	fn, err := e.evalExpr(n.expr)
	if err != nil {
		return err
	}
	if !fn.IsCallable() {
		return fmt.Errorf("call: expression is not callable")
	}

	result, err := fn.AsCallable().Fn(nil, map[string]Value{"caller": caller})
	if err != nil {
		return err
	}
	return e.write(e.m.print(result))
}

func (e *evaluator) execFilterBlock(n *filterBlockNode) error {
	// Render body to string.
	bodyEval := e.sub(e.scope)
	if err := bodyEval.execNodes(n.body); err != nil {
		return err
	}
	bodyStr := bodyEval.output.String()

	// Apply the filter. The filter expression should be a name or filter chain.
	if fe, ok := n.filter.(*nameExpr); ok {
		filter, ok := filters[fe.name]
		if !ok {
			return fmt.Errorf("unknown filter %q", fe.name)
		}
		result, err := filter(e.m, []Value{NewString(bodyStr)}, nil)
		if err != nil {
			return err
		}
		return e.write(e.m.print(result))
	}

	// For more complex filter expressions, just output the body.
	return e.write(bodyStr)
}

// =============================================================================
// Expression evaluation
// =============================================================================

func (e *evaluator) evalExpr(ex expr) (Value, error) {
	v, err := e.evalExpr0(ex)
	if e.m.err != nil {
		return Undefined(), e.m.err
	}
	return v, err
}

func (e *evaluator) evalExpr0(ex expr) (Value, error) {
	switch n := ex.(type) {
	case *litExpr:
		return n.val, nil

	case *nameExpr:
		v, _ := e.scope.get(n.name)
		return v, nil

	case *attrExpr:
		return e.evalAttr(n)

	case *itemExpr:
		return e.evalItem(n)

	case *sliceExpr:
		return e.evalSlice(n)

	case *unaryExpr:
		return e.evalUnary(n)

	case *binExpr:
		return e.evalBinary(n)

	case *condExpr:
		return e.evalCond(n)

	case *callExpr:
		return e.evalCallExpr(n)

	case *filterExpr:
		return e.evalFilter(n)

	case *testExpr:
		return e.evalTestExpr(n)

	case *listExpr:
		if !e.m.chargeValues(len(n.items)) {
			return Undefined(), e.m.err
		}
		items := make([]Value, len(n.items))
		for i, item := range n.items {
			v, err := e.evalExpr(item)
			if err != nil {
				return Undefined(), err
			}
			items[i] = v
		}
		return NewList(items), nil

	case *dictExpr:
		if !e.m.charge(dictSize) {
			return Undefined(), e.m.err
		}
		d := NewDict()
		dict := d.AsDict()
		for _, pair := range n.pairs {
			key, err := e.evalExpr(pair.key)
			if err != nil {
				return Undefined(), err
			}
			val, err := e.evalExpr(pair.value)
			if err != nil {
				return Undefined(), err
			}
			k := e.m.print(key)
			if !e.m.charge(entrySize) {
				return Undefined(), e.m.err
			}
			dict.Set(k, val)
		}
		return d, nil

	default:
		return Undefined(), fmt.Errorf("unknown expression type %T", ex)
	}
}

func (e *evaluator) evalAttr(n *attrExpr) (Value, error) {
	obj, err := e.evalExpr(n.obj)
	if err != nil {
		return Undefined(), err
	}

	// Dict attribute access.
	if obj.IsDict() {
		if v, ok := obj.AsDict().Get(n.attr); ok {
			return v, nil
		}

		// Dict methods.
		return e.dictMethod(obj, n.attr)
	}

	// String methods.
	if obj.IsString() {
		return e.stringMethod(obj, n.attr)
	}

	// List methods.
	if obj.IsList() {
		return e.listMethod(obj, n.attr)
	}

	return Undefined(), nil
}

func (e *evaluator) evalItem(n *itemExpr) (Value, error) {
	obj, err := e.evalExpr(n.obj)
	if err != nil {
		return Undefined(), err
	}

	key, err := e.evalExpr(n.key)
	if err != nil {
		return Undefined(), err
	}

	if obj.IsList() {
		idx := int(toInt64(key))
		list := obj.AsList()
		if idx < 0 {
			idx += list.Len()
		}
		if idx < 0 || idx >= list.Len() {
			return Undefined(), nil
		}
		return list.Get(idx), nil
	}

	if obj.IsDict() {
		k := e.m.print(key)
		if v, ok := obj.AsDict().Get(k); ok {
			return v, nil
		}
		return Undefined(), nil
	}

	if obj.IsString() {
		// Index by rune without converting the string: s[i] in a loop
		// over a long string would otherwise copy it every time.
		idx := int(toInt64(key))
		s := obj.AsString()
		if idx < 0 {
			idx += utf8.RuneCountInString(s)
		}
		if idx < 0 {
			return Undefined(), nil
		}
		if isASCII(s) {
			if idx >= len(s) {
				return Undefined(), nil
			}
			return NewString(s[idx : idx+1]), nil
		}
		i := 0
		for off, r := range s {
			if i == idx {
				return NewString(s[off : off+utf8.RuneLen(r)]), nil
			}
			i++
		}
		return Undefined(), nil
	}

	return Undefined(), nil
}

func (e *evaluator) evalSlice(n *sliceExpr) (Value, error) {
	obj, err := e.evalExpr(n.obj)
	if err != nil {
		return Undefined(), err
	}

	if obj.IsList() {
		list := obj.AsList()
		length := list.Len()
		start, stop, step, err := resolveSlice(n, e, length)
		if err != nil {
			return Undefined(), err
		}

		// Fast path for the overwhelmingly common step==1 case
		// (e.g. messages[1:] in chat templates). A single allocation
		// of the exact size avoids the geometric growth of append.
		// Aliasing the source slice would be unsafe because List.Append
		// could later mutate beyond Len() into the backing array.
		if step == 1 {
			if start < 0 {
				start = 0
			}
			if stop > length {
				stop = length
			}
			if start >= stop {
				return NewList(nil), nil
			}
			if !e.m.chargeValues(stop - start) {
				return Undefined(), e.m.err
			}
			items := make([]Value, stop-start)
			copy(items, list.Items[start:stop])
			return NewList(items), nil
		}

		var items []Value
		if step > 0 {
			// Pre-size to the maximum possible iteration count to
			// avoid append's geometric growth allocations.
			count := (stop - start + step - 1) / step
			if count > 0 {
				if !e.m.chargeValues(min(count, length)) {
					return Undefined(), e.m.err
				}
				items = make([]Value, 0, min(count, length))
			}
			for i := start; i < stop; i += step {
				if i >= 0 && i < length {
					items = append(items, list.Items[i])
				}
			}
		} else if step < 0 {
			count := (start - stop - step - 1) / -step
			if count > 0 {
				if !e.m.chargeValues(min(count, length)) {
					return Undefined(), e.m.err
				}
				items = make([]Value, 0, min(count, length))
			}
			for i := start; i > stop; i += step {
				if i >= 0 && i < length {
					items = append(items, list.Items[i])
				}
			}
		}
		return NewList(items), nil
	}

	if obj.IsString() {
		s := obj.AsString()

		// ASCII fast path. Most chat-template string slicing operates
		// on tag/role names or message content that is ASCII; for those
		// we can index by byte and skip the []rune conversion entirely.
		// This is the dominant cost in the kronk dense profile because
		// the system prompt can be tens of thousands of bytes.
		if isASCII(s) {
			length := len(s)
			start, stop, step, err := resolveSlice(n, e, length)
			if err != nil {
				return Undefined(), err
			}

			if step == 1 {
				if start < 0 {
					start = 0
				}
				if stop > length {
					stop = length
				}
				if start >= stop {
					return NewString(""), nil
				}
				return NewString(s[start:stop]), nil
			}

			if step == -1 {
				if start >= length {
					start = length - 1
				}
				if stop < -1 {
					stop = -1
				}
				if start <= stop {
					return NewString(""), nil
				}
				if !e.m.chargeMul(int64(start-stop), 2) {
					return Undefined(), e.m.err
				}
				buf := make([]byte, 0, start-stop)
				for i := start; i > stop; i-- {
					buf = append(buf, s[i])
				}
				return NewString(string(buf)), nil
			}
			// Fall through to the general path for unusual steps.
		}

		if !e.m.runes(s) || !e.m.chargeMul(int64(len(s)), 4) {
			return Undefined(), e.m.err
		}
		runes := []rune(s)
		length := len(runes)
		start, stop, step, err := resolveSlice(n, e, length)
		if err != nil {
			return Undefined(), err
		}
		var result []rune
		if step > 0 {
			for i := start; i < stop; i += step {
				if i >= 0 && i < length {
					result = append(result, runes[i])
				}
			}
		} else if step < 0 {
			for i := start; i > stop; i += step {
				if i >= 0 && i < length {
					result = append(result, runes[i])
				}
			}
		}
		return NewString(string(result)), nil
	}

	return Undefined(), nil
}

// isASCII reports whether s contains only 7-bit ASCII bytes. Used to
// skip the []rune conversion in evalSlice's string branch when byte
// indexing produces the same result as code-point indexing.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func resolveSlice(n *sliceExpr, e *evaluator, length int) (int, int, int, error) {
	step := 1
	if n.step != nil {
		v, err := e.evalExpr(n.step)
		if err != nil {
			return 0, 0, 0, err
		}
		step = int(toInt64(v))
		if step == 0 {
			step = 1
		}
	}

	var start, stop int

	if step > 0 {
		start = 0
		stop = length
	} else {
		start = length - 1
		stop = -length - 1
	}

	if n.start != nil {
		v, err := e.evalExpr(n.start)
		if err != nil {
			return 0, 0, 0, err
		}
		start = int(toInt64(v))
		if start < 0 {
			start += length
		}
	}

	if n.stop != nil {
		v, err := e.evalExpr(n.stop)
		if err != nil {
			return 0, 0, 0, err
		}
		stop = int(toInt64(v))
		if stop < 0 {
			stop += length
		}
	}

	// Clamp to the sequence, so that the callers' loops (which skip
	// indices outside it) do not walk ten billion of them for
	// l[0:10000000000:3]. The result is the same.
	if step > 0 {
		start, stop = max(start, 0), min(stop, length)
	} else {
		start, stop = min(start, length-1), max(stop, -1)
	}
	return start, stop, step, nil
}

func (e *evaluator) evalUnary(n *unaryExpr) (Value, error) {
	operand, err := e.evalExpr(n.operand)
	if err != nil {
		return Undefined(), err
	}

	switch n.op {
	case "not":
		return NewBool(!operand.IsTruthy()), nil
	case "-":
		if operand.IsInt() {
			return NewInt(-operand.AsInt()), nil
		}
		if operand.IsFloat() {
			return NewFloat(-operand.AsFloat()), nil
		}
		return NewInt(0), nil
	case "+":
		return operand, nil
	}

	return Undefined(), fmt.Errorf("unknown unary operator %q", n.op)
}

func (e *evaluator) evalBinary(n *binExpr) (Value, error) {
	// Short-circuit for and/or.
	if n.op == "and" {
		left, err := e.evalExpr(n.left)
		if err != nil {
			return Undefined(), err
		}
		if !left.IsTruthy() {
			return left, nil
		}
		return e.evalExpr(n.right)
	}

	if n.op == "or" {
		left, err := e.evalExpr(n.left)
		if err != nil {
			return Undefined(), err
		}
		if left.IsTruthy() {
			return left, nil
		}
		return e.evalExpr(n.right)
	}

	left, err := e.evalExpr(n.left)
	if err != nil {
		return Undefined(), err
	}

	right, err := e.evalExpr(n.right)
	if err != nil {
		return Undefined(), err
	}

	switch n.op {
	case "+":
		return e.m.addValues(left, right), nil
	case "-":
		return subValues(left, right), nil
	case "*":
		return e.m.mulValues(left, right), nil
	case "/":
		return divValues(left, right), nil
	case "//":
		return floorDivValues(left, right), nil
	case "%":
		return modValues(left, right), nil
	case "**":
		return powValues(left, right), nil
	case "~":
		return NewString(e.m.concat(e.m.print(left), e.m.print(right))), nil
	case "==":
		return NewBool(e.m.valuesEqual(left, right)), nil
	case "!=":
		return NewBool(!e.m.valuesEqual(left, right)), nil
	case "<":
		return NewBool(compareValues(left, right) < 0), nil
	case ">":
		return NewBool(compareValues(left, right) > 0), nil
	case "<=":
		return NewBool(compareValues(left, right) <= 0), nil
	case ">=":
		return NewBool(compareValues(left, right) >= 0), nil
	case "in":
		return NewBool(e.m.contains(right, left)), nil
	case "not in":
		return NewBool(!e.m.contains(right, left)), nil
	}

	return Undefined(), fmt.Errorf("unknown binary operator %q", n.op)
}

func (e *evaluator) evalCond(n *condExpr) (Value, error) {
	cond, err := e.evalExpr(n.condition)
	if err != nil {
		return Undefined(), err
	}

	if cond.IsTruthy() {
		return e.evalExpr(n.trueExpr)
	}

	if n.falseExpr != nil {
		return e.evalExpr(n.falseExpr)
	}

	return Undefined(), nil
}

func (e *evaluator) evalCallExpr(n *callExpr) (Value, error) {
	fn, err := e.evalExpr(n.fn)
	if err != nil {
		return Undefined(), err
	}

	if !fn.IsCallable() {
		return Undefined(), fmt.Errorf("%s is not callable: %s", callableName(n.fn), kindName(fn))
	}

	args := make([]Value, len(n.args))
	for i, a := range n.args {
		v, err := e.evalExpr(a)
		if err != nil {
			return Undefined(), err
		}
		args[i] = v
	}

	var kwargs map[string]Value
	if len(n.kwargs) > 0 {
		kwargs = make(map[string]Value, len(n.kwargs))
		for _, kw := range n.kwargs {
			v, err := e.evalExpr(kw.value)
			if err != nil {
				return Undefined(), err
			}
			kwargs[kw.name] = v
		}
	}

	return fn.AsCallable().Fn(args, kwargs)
}

func callableName(ex expr) string {
	switch n := ex.(type) {
	case *nameExpr:
		return n.name

	case *attrExpr:
		return callableName(n.obj) + "." + n.attr

	case *itemExpr:
		return callableName(n.obj) + "[item]"

	default:
		return ex.nodeType()
	}
}

func (e *evaluator) evalFilter(n *filterExpr) (Value, error) {
	input, err := e.evalExpr(n.expr)
	if err != nil {
		return Undefined(), err
	}

	// Look up filter in builtins.
	filter, builtin := filters[n.name]
	var filterVal Value
	if !builtin {
		// Also check scope for user-defined filters.
		var ok bool
		filterVal, ok = e.scope.get(n.name)
		if !ok {
			return Undefined(), fmt.Errorf("unknown filter %q", n.name)
		}
		if !filterVal.IsCallable() {
			return Undefined(), fmt.Errorf("filter %q is not callable", n.name)
		}
	}

	// Build args: input as first, then additional args.
	args := make([]Value, 1+len(n.args))
	args[0] = input
	for i, a := range n.args {
		v, err := e.evalExpr(a)
		if err != nil {
			return Undefined(), err
		}
		args[i+1] = v
	}

	var kwargs map[string]Value
	if len(n.kwargs) > 0 {
		kwargs = make(map[string]Value, len(n.kwargs))
		for _, kw := range n.kwargs {
			v, err := e.evalExpr(kw.value)
			if err != nil {
				return Undefined(), err
			}
			kwargs[kw.name] = v
		}
	}

	if builtin {
		return filter(e.m, args, kwargs)
	}
	return filterVal.AsCallable().Fn(args, kwargs)
}

func (e *evaluator) evalTestExpr(n *testExpr) (Value, error) {
	val, err := e.evalExpr(n.expr)
	if err != nil {
		return Undefined(), err
	}

	var testArgs []Value
	for _, a := range n.args {
		v, err := e.evalExpr(a)
		if err != nil {
			return Undefined(), err
		}
		testArgs = append(testArgs, v)
	}

	result, err := evalTest(e.m, n.name, val, testArgs)
	if err != nil {
		return Undefined(), err
	}

	if n.negated {
		result = !result
	}

	return NewBool(result), nil
}

// =============================================================================
// String methods
// =============================================================================

func (e *evaluator) stringMethod(obj Value, method string) (Value, error) {
	s := obj.AsString()
	m := e.m

	switch method {
	case "strip":
		return e.makeStringFunc("strip", func(args []Value, kwargs map[string]Value) (Value, error) {
			if len(args) > 0 {
				return NewString(strings.Trim(s, m.print(args[0]))), nil
			}
			return NewString(strings.TrimSpace(s)), nil
		}), nil

	case "lstrip":
		return e.makeStringFunc("lstrip", func(args []Value, kwargs map[string]Value) (Value, error) {
			if len(args) > 0 {
				return NewString(strings.TrimLeft(s, m.print(args[0]))), nil
			}
			return NewString(strings.TrimLeftFunc(s, func(r rune) bool {
				return r == ' ' || r == '\t' || r == '\n' || r == '\r'
			})), nil
		}), nil

	case "rstrip":
		return e.makeStringFunc("rstrip", func(args []Value, kwargs map[string]Value) (Value, error) {
			if len(args) > 0 {
				return NewString(strings.TrimRight(s, m.print(args[0]))), nil
			}
			return NewString(strings.TrimRightFunc(s, func(r rune) bool {
				return r == ' ' || r == '\t' || r == '\n' || r == '\r'
			})), nil
		}), nil

	case "split":
		return e.makeStringFunc("split", func(args []Value, kwargs map[string]Value) (Value, error) {
			// Count the parts first (the iterators allocate nothing) so
			// that the list is charged before it exists.
			if len(args) == 0 {
				n := 0
				for range strings.FieldsSeq(s) {
					n++
				}
				if !m.chargeNew(n) {
					return Undefined(), m.err
				}
				items := make([]Value, 0, n)
				for p := range strings.FieldsSeq(s) {
					items = append(items, NewString(p))
				}
				return NewList(items), nil
			}
			sep := m.print(args[0])
			n := 1
			if sep == "" {
				n = utf8.RuneCountInString(s)
			} else {
				n += strings.Count(s, sep)
			}
			if !m.chargeNew(n) {
				return Undefined(), m.err
			}
			items := make([]Value, 0, n)
			for p := range strings.SplitSeq(s, sep) {
				items = append(items, NewString(p))
			}
			return NewList(items), nil
		}), nil

	case "startswith":
		return e.makeStringFunc("startswith", func(args []Value, kwargs map[string]Value) (Value, error) {
			if len(args) == 0 {
				return NewBool(false), nil
			}
			return NewBool(strings.HasPrefix(s, m.print(args[0]))), nil
		}), nil

	case "endswith":
		return e.makeStringFunc("endswith", func(args []Value, kwargs map[string]Value) (Value, error) {
			if len(args) == 0 {
				return NewBool(false), nil
			}
			return NewBool(strings.HasSuffix(s, m.print(args[0]))), nil
		}), nil

	case "replace":
		return e.makeStringFunc("replace", func(args []Value, kwargs map[string]Value) (Value, error) {
			if len(args) < 2 {
				return NewString(s), nil
			}
			old := m.print(args[0])
			newStr := m.print(args[1])
			count := -1
			if len(args) > 2 {
				count = int(toInt64(args[2]))
			}
			return NewString(m.replace(s, old, newStr, count)), nil
		}), nil

	case "upper":
		return e.makeStringFunc("upper", func(args []Value, kwargs map[string]Value) (Value, error) {
			if !m.caseMapped(s) {
				return Undefined(), m.err
			}
			return NewString(strings.ToUpper(s)), nil
		}), nil

	case "lower":
		return e.makeStringFunc("lower", func(args []Value, kwargs map[string]Value) (Value, error) {
			if !m.caseMapped(s) {
				return Undefined(), m.err
			}
			return NewString(strings.ToLower(s)), nil
		}), nil

	case "title":
		return e.makeStringFunc("title", func(args []Value, kwargs map[string]Value) (Value, error) {
			// Simple title case: capitalize first letter of each word.
			if !m.runes(s) {
				return Undefined(), m.err
			}
			runes := []rune(s)
			inWord := false
			for i, r := range runes {
				if r == ' ' || r == '\t' || r == '\n' {
					inWord = false
				} else if !inWord {
					runes[i] = []rune(strings.ToUpper(string(r)))[0]
					inWord = true
				}
			}
			return NewString(string(runes)), nil
		}), nil

	case "capitalize":
		return e.makeStringFunc("capitalize", func(args []Value, kwargs map[string]Value) (Value, error) {
			if len(s) == 0 {
				return NewString(""), nil
			}
			if !m.runes(s) {
				return Undefined(), m.err
			}
			runes := []rune(s)
			runes[0] = []rune(strings.ToUpper(string(runes[0])))[0]
			return NewString(string(runes)), nil
		}), nil

	case "count":
		return e.makeStringFunc("count", func(args []Value, kwargs map[string]Value) (Value, error) {
			if len(args) == 0 {
				return NewInt(0), nil
			}
			return NewInt(int64(strings.Count(s, m.print(args[0])))), nil
		}), nil

	case "find":
		return e.makeStringFunc("find", func(args []Value, kwargs map[string]Value) (Value, error) {
			if len(args) == 0 {
				return NewInt(-1), nil
			}
			return NewInt(int64(strings.Index(s, m.print(args[0])))), nil
		}), nil

	case "format":
		return e.makeStringFunc("format", func(args []Value, kwargs map[string]Value) (Value, error) {
			result := s
			for i, arg := range args {
				placeholder := fmt.Sprintf("{%d}", i)
				a := m.print(arg)
				result = m.replace(result, placeholder, a, -1)
				result = m.replace(result, "{}", a, 1)
			}
			return NewString(result), nil
		}), nil
	}

	return Undefined(), nil
}

func (e *evaluator) makeStringFunc(name string, fn func([]Value, map[string]Value) (Value, error)) Value {
	return NewCallable("str."+name, fn)
}

// =============================================================================
// List methods
// =============================================================================

func (e *evaluator) listMethod(obj Value, method string) (Value, error) {
	list := obj.AsList()
	m := e.m

	switch method {
	case "append":
		return NewCallable("list.append", func(args []Value, kwargs map[string]Value) (Value, error) {
			if len(args) > 0 {
				if !m.reserve(list, 1) {
					return Undefined(), m.err
				}
				list.Append(args[0])
			}
			return None(), nil
		}), nil

	case "pop":
		return NewCallable("list.pop", func(args []Value, kwargs map[string]Value) (Value, error) {
			if list.Len() == 0 {
				return Undefined(), fmt.Errorf("pop from empty list")
			}
			idx := list.Len() - 1
			if len(args) > 0 {
				idx = int(toInt64(args[0]))
				if idx < 0 {
					idx += list.Len()
				}
			}
			if idx < 0 || idx >= list.Len() {
				return Undefined(), fmt.Errorf("pop index out of range")
			}
			val := list.Items[idx]
			list.Items = append(list.Items[:idx], list.Items[idx+1:]...)
			return val, nil
		}), nil

	case "insert":
		return NewCallable("list.insert", func(args []Value, kwargs map[string]Value) (Value, error) {
			if len(args) < 2 {
				return None(), nil
			}
			idx := min(max(int(toInt64(args[0])), 0), list.Len())
			if !m.reserve(list, 1) {
				return Undefined(), m.err
			}
			list.Items = append(list.Items, Undefined())
			copy(list.Items[idx+1:], list.Items[idx:])
			list.Items[idx] = args[1]
			return None(), nil
		}), nil
	}

	return Undefined(), nil
}

// =============================================================================
// Dict methods
// =============================================================================

func (e *evaluator) dictMethod(obj Value, method string) (Value, error) {
	d := obj.AsDict()
	m := e.m

	switch method {
	case "items":
		return NewCallable("dict.items", func(args []Value, kwargs map[string]Value) (Value, error) {
			if !m.chargeMul(int64(d.Len()), pairSize) {
				return Undefined(), m.err
			}
			items := make([]Value, 0, d.Len())
			for _, key := range d.Keys {
				pair := NewList([]Value{NewString(key), d.Data[key]})
				items = append(items, pair)
			}
			return NewList(items), nil
		}), nil

	case "keys":
		return NewCallable("dict.keys", func(args []Value, kwargs map[string]Value) (Value, error) {
			if !m.chargeNew(d.Len()) {
				return Undefined(), m.err
			}
			items := make([]Value, 0, d.Len())
			for _, key := range d.Keys {
				items = append(items, NewString(key))
			}
			return NewList(items), nil
		}), nil

	case "values":
		return NewCallable("dict.values", func(args []Value, kwargs map[string]Value) (Value, error) {
			if !m.chargeValues(d.Len()) {
				return Undefined(), m.err
			}
			items := make([]Value, 0, d.Len())
			for _, key := range d.Keys {
				items = append(items, d.Data[key])
			}
			return NewList(items), nil
		}), nil

	case "get":
		return NewCallable("dict.get", func(args []Value, kwargs map[string]Value) (Value, error) {
			if len(args) == 0 {
				return Undefined(), nil
			}
			key := m.print(args[0])
			if v, ok := d.Get(key); ok {
				return v, nil
			}
			if len(args) > 1 {
				return args[1], nil
			}
			return None(), nil
		}), nil

	case "pop":
		return NewCallable("dict.pop", func(args []Value, kwargs map[string]Value) (Value, error) {
			if len(args) == 0 {
				return Undefined(), nil
			}
			key := m.print(args[0])
			v, ok := d.Get(key)
			if ok {
				delete(d.Data, key)
				newKeys := make([]string, 0, len(d.Keys)-1)
				for _, k := range d.Keys {
					if k != key {
						newKeys = append(newKeys, k)
					}
				}
				d.Keys = newKeys
				return v, nil
			}
			if len(args) > 1 {
				return args[1], nil
			}
			return Undefined(), nil
		}), nil

	case "update":
		return NewCallable("dict.update", func(args []Value, kwargs map[string]Value) (Value, error) {
			if len(args) > 0 && args[0].IsDict() {
				other := args[0].AsDict()
				if !m.chargeMul(int64(other.Len()), entrySize) {
					return Undefined(), m.err
				}
				for _, key := range other.Keys {
					d.Set(key, other.Data[key])
				}
			}
			return None(), nil
		}), nil
	}

	return Undefined(), nil
}

// =============================================================================
// Arithmetic helpers
// =============================================================================

func (m *meter) addValues(a, b Value) Value {
	if a.IsString() || b.IsString() {
		return NewString(m.concat(m.print(a), m.print(b)))
	}
	if a.IsList() && b.IsList() {
		if !m.chargeValues(a.AsList().Len() + b.AsList().Len()) {
			return Undefined()
		}
		items := make([]Value, 0, a.AsList().Len()+b.AsList().Len())
		items = append(items, a.AsList().Items...)
		items = append(items, b.AsList().Items...)
		return NewList(items)
	}
	if a.IsFloat() || b.IsFloat() {
		return NewFloat(toFloat64(a) + toFloat64(b))
	}
	return NewInt(toInt64(a) + toInt64(b))
}

func subValues(a, b Value) Value {
	if a.IsFloat() || b.IsFloat() {
		return NewFloat(toFloat64(a) - toFloat64(b))
	}
	return NewInt(toInt64(a) - toInt64(b))
}

func (m *meter) mulValues(a, b Value) Value {
	if a.IsString() && b.IsInt() {
		return NewString(m.repeat(a.AsString(), b.AsInt()))
	}
	if a.IsFloat() || b.IsFloat() {
		return NewFloat(toFloat64(a) * toFloat64(b))
	}
	return NewInt(toInt64(a) * toInt64(b))
}

func divValues(a, b Value) Value {
	bf := toFloat64(b)
	if bf == 0 {
		return NewFloat(0)
	}
	return NewFloat(toFloat64(a) / bf)
}

func floorDivValues(a, b Value) Value {
	bi := toInt64(b)
	if bi == 0 {
		return NewInt(0)
	}
	return NewInt(toInt64(a) / bi)
}

func modValues(a, b Value) Value {
	bi := toInt64(b)
	if bi == 0 {
		return NewInt(0)
	}
	return NewInt(toInt64(a) % bi)
}

func powValues(a, b Value) Value {
	return NewFloat(math.Pow(toFloat64(a), toFloat64(b)))
}

// kindName names a value's type for an error message without printing the
// value (which may be huge, or contain itself).
func kindName(v Value) string {
	switch v.kind {
	case KindNone:
		return "none"
	case KindBool:
		return "boolean"
	case KindInt:
		return "integer"
	case KindFloat:
		return "float"
	case KindString:
		return "string"
	case KindList:
		return "list"
	case KindDict:
		return "dict"
	case KindCallable:
		return "callable"
	}
	return "undefined"
}
