package main

/*
#include "bridge.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/chat"
)

// maxMessages bounds n_messages before anything is read through the pointer.
const maxMessages = 1 << 20

//export kvwgo_chat_apply_template
func kvwgo_chat_apply_template(hv C.uintptr_t, msgs *C.kvw_chat_message, n C.size_t, addGen C.int32_t,
	name *C.char, buf *C.char, bufSize C.size_t, outLen *C.size_t) (st C.int32_t) {
	const fn = "kvw_chat_apply_template"
	defer guard(&st, fn)
	h, st := lookup(hv, fn)
	if st != stOK {
		return st
	}
	switch {
	case outLen == nil:
		return fail(stInvalid, "%s: out_len is NULL", fn)
	case msgs == nil && n != 0:
		return fail(stInvalid, "%s: messages is NULL but n_messages is %d", fn, uint64(n))
	case buf == nil && bufSize != 0:
		return fail(stInvalid, "%s: buf is NULL but buf_size is %d", fn, uint64(bufSize))
	case uint64(n) > maxMessages:
		return fail(stInvalid, "%s: n_messages %d exceeds %d", fn, uint64(n), maxMessages)
	}
	tmplName, st := optText(name, fn, "template_name")
	if st != stOK {
		return st
	}
	var conv []chat.Message
	if n > 0 {
		for i, m := range unsafe.Slice(msgs, int(n)) {
			role, st := goText(m.role, fn, fmt.Sprintf("messages[%d].role", i))
			if st != stOK {
				return st
			}
			content, st := optText(m.content, fn, fmt.Sprintf("messages[%d].content", i))
			if st != stOK {
				return st
			}
			conv = append(conv, chat.Message{Role: role, Content: content})
		}
	}
	text, err := h.eng.ApplyChatTemplate(conv, engine.ChatOptions{AddGenerationPrompt: addGen != 0, Template: tmplName})
	if err != nil {
		return fail(stInvalid, "%s: %v", fn, err)
	}
	*outLen = C.size_t(len(text))
	if buf == nil {
		return stOK // size query
	}
	if uint64(bufSize) < uint64(len(text))+1 {
		return fail(stTooSmall, "%s: %d bytes plus NUL do not fit in buf_size %d", fn, len(text), uint64(bufSize))
	}
	writeStr(buf, []byte(text))
	return stOK
}
